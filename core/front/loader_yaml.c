/* loader_yaml.c — reads pipeline YAML into a small tree of scalars, lists and mappings that
 * keeps every node's line and column. Built from libyaml's event API rather than its
 * document API so that nesting depth is limited before anything deep is built, and so that
 * duplicate mapping keys (which libyaml accepts) are caught here. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/context.h"
#include "front/loader_yaml.h"

static sl_srcloc mark_loc(yaml_mark_t m) {
    return (sl_srcloc){(int)m.line + 1, (int)m.column + 1};
}

/* Where a scalar's text begins: after the opening quote of a quoted scalar; for a block
 * scalar (| or >), at the indentation of its first non-blank line after the indicator. */
static sl_srcloc scalar_text_loc(const char *text, size_t length, const yaml_event_t *ev) {
    sl_srcloc loc = mark_loc(ev->start_mark);
    yaml_scalar_style_t style = ev->data.scalar.style;
    if (style == YAML_SINGLE_QUOTED_SCALAR_STYLE || style == YAML_DOUBLE_QUOTED_SCALAR_STYLE) {
        loc.col += 1;
    } else if (style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE) {
        size_t i = ev->start_mark.index;
        for (;;) {
            while (i < length && text[i] != '\n') i++; /* to the end of this line */
            if (i >= length) break;
            i++;
            loc.line++;
            size_t indent = 0;
            while (i + indent < length && text[i + indent] == ' ') indent++;
            if (i + indent < length && text[i + indent] != '\n' && text[i + indent] != '\r') {
                loc.col = (int)indent + 1;
                break;
            }
        }
    }
    return loc;
}

/* An expression YAML could not read as a plain scalar: a conditional `c ? a : b` holds ": ",
 * which YAML takes for the start of a mapping value, so an unquoted one is a syntax error
 * ("mapping values are not allowed in this context" in block style, "did not find expected
 * ',' or '}'" in flow style). Finds one on the line of a syntax error: the expression's
 * first and one-past-last byte and, where it is a mapping value, its key's first byte and
 * the colon after the key (*key_end; *key == *key_end when there is no key). */
typedef struct unquoted_expr {
    size_t key, key_end, start, end;
} unquoted_expr;

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

static bool find_unquoted_conditional(const char *line, size_t len, unquoted_expr *e) {
    size_t i = 0;
    for (;;) { /* indentation and sequence indicators ("- ") */
        while (i < len && is_blank(line[i])) i++;
        if (i < len && line[i] == '-' && (i + 1 == len || is_blank(line[i + 1]))) i++;
        else break;
    }
    /* Left to right: an item (a key or a value) begins at the line's content, after a
     * key's ": ", and after a flow collection's '{', '[' or ','; a '?' inside an item that
     * is later followed by ": " in the same item is the conditional. */
    size_t item = i, key = i, key_end = i, q = 0;
    bool has_key = false, has_q = false;
    int flow = 0, paren = 0;
    char quote = 0;
    for (; i < len; i++) {
        char c = line[i];
        if (quote) {
            if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (c == '#' && i > 0 && is_blank(line[i - 1])) {
            return false; /* a comment: nothing after it counts */
        } else if (c == '(') {
            paren++;
        } else if (c == ')') {
            if (paren > 0) paren--;
        } else if (paren == 0 && (c == '{' || c == '[' || (flow > 0 && c == ','))) {
            if (c != ',') flow++;
            item = key = key_end = i + 1;
            has_key = has_q = false;
        } else if (paren == 0 && flow > 0 && (c == '}' || c == ']')) {
            flow--;
        } else if (c == ':' && (i + 1 == len || is_blank(line[i + 1]))) {
            if (has_q) break;
            if (!has_key) {
                key = item;
                key_end = i;
                item = i + 1;
                has_key = true;
            }
        } else if (c == '?' && !has_q) {
            size_t k = item;
            while (k < i && is_blank(line[k])) k++;
            if (k < i) { /* not the explicit-key indicator "? " that opens an item */
                q = i;
                has_q = true;
            }
        }
    }
    if (i >= len || !has_q) return false;
    while (key < key_end && is_blank(line[key])) key++;
    e->key = key;
    e->key_end = has_key ? key_end : key;
    e->start = item;
    while (e->start < q && is_blank(line[e->start])) e->start++;
    /* it ends at the end of the line, a comment, or (in a flow collection) at a ',', '}' or
     * ']' outside parentheses */
    size_t end = q;
    for (paren = 0; end < len; end++) {
        char c = line[end];
        if (c == '(') paren++;
        else if (c == ')' && paren > 0) paren--;
        else if (c == '#' && is_blank(line[end - 1])) break;
        else if (flow > 0 && paren == 0 && (c == ',' || c == '}' || c == ']')) break;
    }
    while (end > e->start && is_blank(line[end - 1])) end--;
    e->end = end;
    return true;
}

/* Reports a libyaml syntax error. When the line holds an unquoted conditional, says that it
 * is the cause, points at it and shows it quoted. */
static sluice_status yaml_syntax_error(sluice_context *ctx, const yaml_parser_t *parser,
                                       const char *text, size_t length) {
    sl_srcloc loc = mark_loc(parser->problem_mark);
    const char *problem = parser->problem ? parser->problem : "malformed YAML";
    const char *context = parser->context ? parser->context : "";
    const char *sep = parser->context ? " " : "";
    /* the error's line, found by its number (libyaml's index counts characters, not bytes) */
    size_t line_start = 0;
    for (size_t line = 0; line < parser->problem_mark.line && line_start < length; line_start++)
        if (text[line_start] == '\n') line++;
    size_t line_end = line_start;
    while (line_end < length && text[line_end] != '\n' && text[line_end] != '\r') line_end++;
    unquoted_expr e;
    if (!find_unquoted_conditional(text + line_start, line_end - line_start, &e))
        return sl_diag(ctx, SLUICE_ERR_YAML_SYNTAX, loc, "YAML syntax error: %s%s%s", problem,
                       sep, context);
    const char *line = text + line_start;
    const char q = memchr(line + e.start, '\'', e.end - e.start) ? '"' : '\'';
    loc.col = (int)e.start + 1;
    return sl_diag(ctx, SLUICE_ERR_YAML_SYNTAX, loc,
                   "YAML syntax error (%s%s%s): this expression holds ': ' (a conditional "
                   "`c ? a : b`), which YAML reads as the end of a key; quote the expression: "
                   "%.*s%s%c%.*s%c",
                   problem, sep, context, (int)(e.key_end - e.key), line + e.key,
                   e.key_end > e.key ? ": " : "", q, (int)(e.end - e.start), line + e.start, q);
}

void ld_node_free(sluice_context *ctx, ld_node *n) {
    if (!n) return;
    int nitems = n->kind == LD_MAPPING ? 2 * n->count : n->count;
    for (int i = 0; i < nitems; i++) ld_node_free(ctx, n->items[i]);
    sl_free(ctx, n->items);
    sl_free(ctx, n->text);
    sl_free(ctx, n);
}

/* An open list or mapping while its events arrive. */
typedef struct frame {
    ld_node *node;
    int items, cap; /* items appended so far (keys and values counted separately) */
} frame;

typedef struct reader {
    sluice_context *ctx;
    frame stack[SL_MAX_YAML_DEPTH + 1];
    int depth;
    ld_node *root;
} reader;

static bool append_child(reader *r, ld_node *child) {
    if (r->depth == 0) {
        r->root = child;
        return true;
    }
    frame *f = &r->stack[r->depth - 1];
    if (f->items == f->cap) {
        int cap = f->cap ? f->cap * 2 : 8;
        ld_node **items = sl_realloc(r->ctx, f->node->items, (size_t)cap * sizeof *items);
        if (!items) return false;
        f->node->items = items;
        f->cap = cap;
    }
    f->node->items[f->items++] = child;
    return true;
}

typedef struct key_ref {
    const char *text;
    int index;
} key_ref;

static int key_ref_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    if (c) return c;
    return (x->index > y->index) - (x->index < y->index);
}

static int int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Where the first occurrence of `text` sits in the mapping: refs is sorted by text and then
 * by position, so it is the lower bound of text. */
static int first_with_text(const key_ref *refs, int n, const char *text) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(refs[mid].text, text) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return refs[lo].index;
}

/* Reports and removes repeated keys of a finished mapping (the first one stays). Sorting
 * keeps this O(n log n) for hostile files with very many keys. Returns false on OOM. */
static bool drop_duplicate_keys(reader *r, ld_node *map) {
    int n = map->count;
    if (n < 2) return true;
    key_ref *refs = sl_alloc(r->ctx, (size_t)n * sizeof *refs);
    int *dups = sl_alloc(r->ctx, (size_t)n * sizeof *dups);
    if (!refs || !dups) {
        sl_free(r->ctx, refs);
        sl_free(r->ctx, dups);
        return false;
    }
    for (int i = 0; i < n; i++) refs[i] = (key_ref){map->items[2 * i]->text, i};
    qsort(refs, (size_t)n, sizeof *refs, key_ref_cmp);
    int ndups = 0;
    for (int i = 1; i < n; i++)
        if (strcmp(refs[i].text, refs[i - 1].text) == 0) dups[ndups++] = refs[i].index;
    if (ndups) {
        qsort(dups, (size_t)ndups, sizeof *dups, int_cmp);
        for (int d = 0; d < ndups; d++) {
            const ld_node *key = map->items[2 * dups[d]];
            const ld_node *first = map->items[2 * first_with_text(refs, n, key->text)];
            sl_diag(r->ctx, SLUICE_ERR_DUPLICATE_KEY, key->loc,
                    "key '%s' is given twice in this mapping (first at line %d); keep one",
                    key->text, first->loc.line);
        }
        /* compact the pairs, freeing the dropped ones */
        int out = 0, d = 0;
        for (int i = 0; i < n; i++) {
            if (d < ndups && dups[d] == i) {
                d++;
                ld_node_free(r->ctx, map->items[2 * i]);
                ld_node_free(r->ctx, map->items[2 * i + 1]);
                continue;
            }
            map->items[2 * out] = map->items[2 * i];
            map->items[2 * out + 1] = map->items[2 * i + 1];
            out++;
        }
        map->count = out;
    }
    sl_free(r->ctx, refs);
    sl_free(r->ctx, dups);
    return true;
}

static void free_reader(reader *r) {
    /* open frames are children of their parents, so freeing the root frees them all; a
     * frame with no root yet (depth > 0 always has stack[0] as root) is covered too. */
    if (r->root) {
        ld_node_free(r->ctx, r->root);
    } else if (r->depth > 0) {
        ld_node_free(r->ctx, r->stack[0].node);
    }
    r->root = NULL;
    r->depth = 0;
}

sluice_status ld_yaml_read(sluice_context *ctx, const char *text, size_t length, ld_node **root) {
    *root = NULL;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, length);

    reader r = {.ctx = ctx};
    sluice_status st = SLUICE_OK;
    int documents = 0;
    bool done = false;
    while (!done && st == SLUICE_OK) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            if (parser.error == YAML_MEMORY_ERROR) {
                st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory parsing YAML");
            } else {
                st = yaml_syntax_error(ctx, &parser, text, length);
            }
            break;
        }
        sl_srcloc loc = mark_loc(ev.start_mark);
        ld_node *node = NULL;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1)
                st = sl_diag(ctx, SLUICE_ERR_YAML_SYNTAX, loc,
                             "a pipeline file holds one YAML document; remove this second one");
            break;
        case YAML_ALIAS_EVENT:
            st = sl_diag(ctx, SLUICE_ERR_YAML_SYNTAX, loc,
                         "YAML aliases (*%s) are not supported in pipeline files; write the "
                         "value out", (const char *)ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            if (r.depth > 0 && r.stack[r.depth - 1].node->kind == LD_MAPPING &&
                r.stack[r.depth - 1].items % 2 == 0 && ev.type != YAML_SCALAR_EVENT) {
                st = sl_diag(ctx, SLUICE_ERR_YAML_SYNTAX, loc,
                             "a mapping key must be a plain name, not a list or mapping");
                break;
            }
            node = sl_calloc(ctx, 1, sizeof *node);
            if (!node) {
                st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory reading YAML");
                break;
            }
            node->loc = loc;
            if (ev.type == YAML_SCALAR_EVENT &&
                memchr(ev.data.scalar.value, 0, ev.data.scalar.length)) {
                /* names and expressions are C strings: an escaped \0 would cut them short */
                sl_free(ctx, node);
                st = sl_diag(ctx, SLUICE_ERR_YAML_SYNTAX, loc,
                             "a value contains a NUL character (\\0); pipeline files are text");
                break;
            }
            if (ev.type == YAML_SCALAR_EVENT) {
                node->kind = LD_SCALAR;
                node->len = ev.data.scalar.length;
                node->text = sl_strndup(ctx, (const char *)ev.data.scalar.value, node->len);
                node->quoted = ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE &&
                               ev.data.scalar.style != YAML_ANY_SCALAR_STYLE;
                node->text_loc = scalar_text_loc(text, length, &ev);
                if (!node->text) {
                    sl_free(ctx, node);
                    st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory reading YAML");
                    break;
                }
            } else {
                node->kind = ev.type == YAML_MAPPING_START_EVENT ? LD_MAPPING : LD_SEQUENCE;
            }
            if (!append_child(&r, node)) {
                ld_node_free(ctx, node);
                st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory reading YAML");
                break;
            }
            if (node->kind != LD_SCALAR) {
                if (r.depth == SL_MAX_YAML_DEPTH) {
                    st = sl_diag(ctx, SLUICE_ERR_LIMIT, loc,
                                 "YAML nesting deeper than %d levels; pipeline files are "
                                 "limited to %d", SL_MAX_YAML_DEPTH, SL_MAX_YAML_DEPTH);
                    break;
                }
                r.stack[r.depth++] = (frame){node, 0, 0};
            }
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
            frame *f = &r.stack[--r.depth];
            if (f->node->kind == LD_MAPPING) {
                f->node->count = f->items / 2;
                if (!drop_duplicate_keys(&r, f->node))
                    st = sl_error(ctx, SLUICE_ERR_NO_MEMORY, "out of memory reading YAML");
            } else {
                f->node->count = f->items;
            }
            break;
        }
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    /* frames still open hold their item counts in the frame only: settle them so freeing
     * walks exactly the children that exist */
    for (int d = 0; d < r.depth; d++) {
        frame *f = &r.stack[d];
        f->node->count = f->node->kind == LD_MAPPING ? f->items / 2 : f->items;
        if (f->node->kind == LD_MAPPING && f->items % 2) {
            ld_node_free(ctx, f->node->items[f->items - 1]);
        }
    }
    if (st != SLUICE_OK) {
        free_reader(&r);
        return st;
    }
    *root = r.root;
    return SLUICE_OK;
}

/* ---- tree queries ---------------------------------------------------------------------- */

const ld_node *ld_get(const ld_node *map, const char *name) {
    if (!map || map->kind != LD_MAPPING) return NULL;
    for (int i = 0; i < map->count; i++)
        if (strcmp(ld_key(map, i)->text, name) == 0) return ld_val(map, i);
    return NULL;
}

bool ld_is_null(const ld_node *n) {
    if (!n || n->kind != LD_SCALAR || n->quoted) return false;
    return n->len == 0 || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0;
}

const char *ld_shape(const ld_node *n) {
    if (!n) return "nothing";
    if (n->kind == LD_MAPPING) return "a mapping";
    if (n->kind == LD_SEQUENCE) return n->count == 0 ? "an empty list" : "a list";
    if (ld_is_null(n)) return "an empty value";
    return "a single value";
}
