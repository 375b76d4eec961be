/* test_doc_examples.c — every YAML example in the documentation works. Each fenced ```yaml
 * block of README.md and of the .md files in pipelines/ is one test:
 *  - a whole pipeline (its first key is `sluice:`) must load, and run on the CPU backend over
 *    input that `sluice gen` makes for it;
 *  - a piece of one (a stage list, an operators block) is made whole by the HTML comment just
 *    before its fence, which the rendered page does not show:
 *        <!-- doc-test: wrap
 *        sluice: 1
 *        name: …
 *        input: {…}
 *        stages:
 *          {example}
 *        -->
 *    where the line `{example}` stands for the block's lines, each indented like it; the
 *    result must load and run like a whole pipeline;
 *  - a block that cannot be made whole is marked `<!-- doc-test: fragment REASON -->` (or
 *    holds a line `# fragment`) and is listed as not checked, with its reason.
 * Any other block fails: no example is skipped silently. The suite also checks the loader's
 * advice for the mistake the first EXPRESSIONS.md example made: an unquoted conditional. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_testutil.h"

typedef enum { EX_WHOLE, EX_WRAPPED, EX_FRAGMENT, EX_UNMARKED } example_kind;

typedef struct example {
    char file[64]; /* relative to the source directory */
    int line;      /* of the opening fence */
    example_kind kind;
    char *yaml;    /* the pipeline to load: the block, or the block inside its wrapper */
    char *note;    /* a fragment's reason */
} example;

static example *examples;
static int nexamples;

/* Extraction runs in main, before any test: its problems end the program. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_FAILURE);
}

/* ---- extraction --------------------------------------------------------------------------- */

static char *dup_range(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) abort();
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static const char *skip_blanks(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* Appends to a growing string. */
static void append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf) abort();
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* The wrapper's text with its `{example}` line replaced by the block, indented like it.
 * NULL when the wrapper has no such line. */
static char *wrap(const char *wrapper, const char *block) {
    const char *mark = strstr(wrapper, "{example}");
    if (!mark) return NULL;
    const char *line_start = mark;
    while (line_start > wrapper && line_start[-1] != '\n') line_start--;
    size_t indent = (size_t)(mark - line_start);
    const char *after = strchr(mark, '\n');
    after = after ? after + 1 : mark + strlen(mark);
    char *out = NULL;
    size_t len = 0, cap = 0;
    append(&out, &len, &cap, wrapper, (size_t)(line_start - wrapper));
    for (const char *l = block; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        append(&out, &len, &cap, line_start, indent);
        append(&out, &len, &cap, l, n);
        append(&out, &len, &cap, "\n", 1);
        l += n + (e ? 1 : 0);
    }
    append(&out, &len, &cap, after, strlen(after));
    return out;
}

/* Whether the block's first key (its first line that is not blank or a comment) is
 * `sluice:`, the version key every pipeline file starts with. */
static bool is_whole_pipeline(const char *block) {
    for (const char *l = block; *l;) {
        const char *t = skip_blanks(l);
        if (*t != '\n' && *t != '#' && *t) return strncmp(t, "sluice:", 7) == 0;
        const char *e = strchr(l, '\n');
        if (!e) break;
        l = e + 1;
    }
    return false;
}

static bool has_fragment_comment(const char *block) {
    for (const char *l = block; *l;) {
        const char *t = skip_blanks(l);
        if (strncmp(t, "# fragment", 10) == 0) return true;
        const char *e = strchr(l, '\n');
        if (!e) break;
        l = e + 1;
    }
    return false;
}

static void add_example(const char *file, int line, const char *directive, const char *block) {
    examples = realloc(examples, (size_t)(nexamples + 1) * sizeof *examples);
    if (!examples) abort();
    example *ex = &examples[nexamples++];
    memset(ex, 0, sizeof *ex);
    snprintf(ex->file, sizeof ex->file, "%s", file);
    ex->line = line;
    const char *d = directive ? skip_blanks(directive) : NULL;
    if (d && strncmp(d, "fragment", 8) == 0) {
        ex->kind = EX_FRAGMENT;
        ex->note = strdup(skip_blanks(d + 8));
    } else if (has_fragment_comment(block)) {
        ex->kind = EX_FRAGMENT;
        ex->note = strdup("(marked `# fragment` in the block)");
    } else if (d && strncmp(d, "wrap", 4) == 0) {
        ex->kind = EX_WRAPPED;
        ex->yaml = wrap(d + 4, block);
        if (!ex->yaml) {
            ex->kind = EX_UNMARKED;
            ex->note = strdup("its doc-test: wrap comment has no {example} line");
        }
    } else if (is_whole_pipeline(block)) {
        ex->kind = EX_WHOLE;
        ex->yaml = strdup(block);
    } else {
        ex->kind = EX_UNMARKED;
        ex->note = strdup(d ? "its doc-test comment is neither `wrap` nor `fragment`"
                            : "it is not a whole pipeline (first key `sluice:`) and has no "
                              "<!-- doc-test: wrap … --> or <!-- doc-test: fragment … --> "
                              "comment before its fence");
    }
}

/* Reads every ```yaml block of one Markdown file. A `<!-- doc-test: … -->` comment applies to
 * the fence that follows it with only blank lines between. Returns the number of blocks. */
static int extract(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", SLUICE_SOURCE_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot read %s", path);
    char *text = NULL;
    size_t tlen = 0, tcap = 0;
    char chunk[4096];
    size_t got;
    append(&text, &tlen, &tcap, "", 0);
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) append(&text, &tlen, &tcap, chunk, got);
    fclose(f);
    int found = 0, lineno = 0;
    char *directive = NULL;
    const char *l = text;
    while (*l) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        const char *next = e ? e + 1 : l + n;
        lineno++;
        const char *t = skip_blanks(l);
        if (strncmp(t, "<!--", 4) == 0 && strstr(t, "doc-test:") &&
            strstr(t, "doc-test:") < l + n) {
            /* the directive runs to "-->", possibly over several lines */
            const char *body = strstr(t, "doc-test:") + 9;
            const char *close = strstr(body, "-->");
            if (!close) die("%s:%d: doc-test comment is not closed", rel, lineno);
            free(directive);
            directive = dup_range(body, (size_t)(close - body));
            for (const char *c = l; c < close; c++)
                if (*c == '\n') lineno++;
            const char *after = strchr(close, '\n');
            l = after ? after + 1 : close + strlen(close);
            continue;
        }
        if (strncmp(t, "```", 3) == 0) {
            const char *lang = skip_blanks(t + 3);
            bool yaml = (strncmp(lang, "yaml", 4) == 0 || strncmp(lang, "yml", 3) == 0);
            int fence_line = lineno;
            char *block = NULL;
            size_t len = 0, cap = 0;
            append(&block, &len, &cap, "", 0);
            l = next;
            bool closed = false;
            while (*l) { /* to the closing fence */
                e = strchr(l, '\n');
                n = e ? (size_t)(e - l) : strlen(l);
                next = e ? e + 1 : l + n;
                lineno++;
                if (strncmp(skip_blanks(l), "```", 3) == 0) {
                    closed = true;
                    l = next;
                    break;
                }
                append(&block, &len, &cap, l, n);
                append(&block, &len, &cap, "\n", 1);
                l = next;
            }
            if (!closed) die("%s:%d: code block is not closed", rel, fence_line);
            if (yaml) {
                add_example(rel, fence_line, directive, block);
                found++;
            }
            free(block);
            free(directive);
            directive = NULL;
            continue;
        }
        if (*t && *t != '\n' && *t != '\r') { /* text between a directive and a fence */
            free(directive);
            directive = NULL;
        }
        l = next;
    }
    free(directive);
    free(text);
    return found;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* README.md and the .md files of pipelines/, in name order. */
static void extract_all(void) {
    extract("README.md");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/pipelines", SLUICE_SOURCE_DIR);
    DIR *d = opendir(dir);
    if (!d) die("cannot list %s", dir);
    char *names[256];
    size_t count = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && count < 256) {
        size_t n = strlen(ent->d_name);
        if (n > 3 && strcmp(ent->d_name + n - 3, ".md") == 0) names[count++] = strdup(ent->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, compare_names);
    for (size_t i = 0; i < count; i++) {
        char rel[300];
        snprintf(rel, sizeof rel, "pipelines/%s", names[i]);
        extract(rel);
        free(names[i]);
    }
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* Loads the example with the library; on failure fails with every diagnostic. */
static void expect_loads(const example *ex) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, ex->yaml, strlen(ex->yaml), ex->file, &p);
    if (st != SLUICE_OK) {
        char msgs[4096] = "", one[1024];
        for (size_t i = 0; i < sluice_context_diagnostic_count(ctx); i++) {
            sluice_diagnostic_format(sluice_context_diagnostic(ctx, i), one, sizeof one);
            strncat(msgs, one, sizeof msgs - strlen(msgs) - 1);
        }
        ck_abort_msg("%s:%d: the YAML example does not load (%s):\n%s--- as loaded (%s):\n%s",
                     ex->file, ex->line, sluice_status_name(st), msgs,
                     ex->kind == EX_WRAPPED ? "inside its doc-test wrapper" : "the block",
                     ex->yaml);
    }
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}

/* Generates 1000 rows for the example with `sluice gen` and runs it on the CPU. */
static void expect_runs(const example *ex) {
    cli_tmp_make();
    FILE *f = fopen(cli_tmp("example.yaml"), "w");
    ck_assert_ptr_nonnull(f);
    fputs(ex->yaml, f);
    fclose(f);
    cli_result r = cli_run("gen '%s' --rows 1000 --seed 7 --out '%s'", cli_tmp("example.yaml"),
                           cli_tmp("in"));
    ck_assert_msg(r.status == 0, "%s:%d: `sluice gen` for the example exited %d:\n%s", ex->file,
                  ex->line, r.status, r.err);
    cli_result_free(&r);
    r = cli_run("run '%s' --in '%s' --out '%s' --backend cpu", cli_tmp("example.yaml"),
                cli_tmp("in"), cli_tmp("out"));
    ck_assert_msg(r.status == 0, "%s:%d: `sluice run` of the example exited %d:\n%s\n%s",
                  ex->file, ex->line, r.status, r.err, ex->yaml);
    cli_result_free(&r);
    cli_tmp_remove();
}

START_TEST(doc_example_works) {
    const example *ex = &examples[_i];
    switch (ex->kind) {
    case EX_FRAGMENT:
        /* listed in the log so a reader sees what is not checked, and why */
        fprintf(stderr, "%s:%d: fragment, not checked: %s\n", ex->file, ex->line, ex->note);
        return;
    case EX_UNMARKED:
        ck_abort_msg("%s:%d: YAML example not checked: %s", ex->file, ex->line, ex->note);
        return;
    case EX_WHOLE:
    case EX_WRAPPED:
        expect_loads(ex);
        expect_runs(ex);
        return;
    }
}
END_TEST

/* The documentation has YAML examples and the extraction finds them (a broken extraction
 * would otherwise pass with nothing to check). */
START_TEST(examples_are_found) {
    int whole = 0;
    for (int i = 0; i < nexamples; i++) whole += examples[i].kind == EX_WHOLE;
    ck_assert_msg(nexamples >= 4 && whole >= 2,
                  "found %d YAML examples (%d whole pipelines) in README.md and pipelines/*.md",
                  nexamples, whole);
}
END_TEST

/* The loader's advice for an unquoted conditional, in block and flow style: it names the
 * cause, points at the expression, and shows it quoted. */
static void expect_hint(const char *yaml, const char *where, const char *quoted) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    char msg[1024];
    ck_assert_int_eq(tu_load_fail(ctx, yaml, msg, sizeof msg), SLUICE_ERR_YAML_SYNTAX);
    ck_assert_msg(strstr(msg, where) != NULL, "expected the location %s in: %s", where, msg);
    ck_assert_msg(strstr(msg, "quote the expression") != NULL, "no quoting advice in: %s", msg);
    ck_assert_msg(strstr(msg, quoted) != NULL, "expected %s in: %s", quoted, msg);
    sluice_context_destroy(ctx);
}

START_TEST(unquoted_conditional_gets_quoting_advice) {
    const char *head = "sluice: 1\nname: t\ninput: {moving: bool, vx: f32, vy: f32}\nstages:\n";
    char yaml[1024];
    /* block style: the expression begins at line 6, column 14 */
    snprintf(yaml, sizeof yaml, "%s  - map:\n      speed: moving ? sqrt(vx*vx + vy*vy) : 0\n", head);
    expect_hint(yaml, ":6:14:", "speed: 'moving ? sqrt(vx*vx + vy*vy) : 0'");
    /* flow style, with an entry after it: the expression alone is quoted */
    snprintf(yaml, sizeof yaml, "%s  - map: {speed: moving ? sqrt(vx) : 0, w: vx}\n", head);
    expect_hint(yaml, ":5:18:", "speed: 'moving ? sqrt(vx) : 0'");
    /* a stage whose value is the expression */
    snprintf(yaml, sizeof yaml, "%s  - filter: moving ? vx > 0 : vy > 0   # keep some\n", head);
    expect_hint(yaml, ":5:13:", "filter: 'moving ? vx > 0 : vy > 0'");
    /* quoted, it loads */
    snprintf(yaml, sizeof yaml, "%s  - map: {speed: 'moving ? max(vx, vy) : 0'}\n", head);
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    sluice_pipeline *p = tu_load(ctx, yaml);
    sluice_pipeline_free(p);
    sluice_context_destroy(ctx);
}
END_TEST

/* Other syntax errors keep libyaml's message and location, without the advice. */
START_TEST(other_syntax_errors_get_no_advice) {
    sluice_context *ctx;
    ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK);
    char msg[1024];
    ck_assert_int_eq(tu_load_fail(ctx,
                                  "sluice: 1\nname: t\ninput: {x: f32}\nstages:\n"
                                  "  - map:\n      y: x : 2\n",
                                  msg, sizeof msg),
                     SLUICE_ERR_YAML_SYNTAX);
    ck_assert_msg(strstr(msg, "<test>:6:") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "quote the expression") == NULL, "unexpected advice: %s", msg);
    ck_assert_int_eq(tu_load_fail(ctx, "sluice: 1\nname: t\ninput: {x: f32, y: x ? f32\n", msg,
                                  sizeof msg),
                     SLUICE_ERR_YAML_SYNTAX);
    ck_assert_msg(strstr(msg, "quote the expression") == NULL, "unexpected advice: %s", msg);
    sluice_context_destroy(ctx);
}
END_TEST

int main(void) {
    extract_all();
    Suite *s = suite_create("doc_examples");
    TCase *tc = tcase_create("doc_examples");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, examples_are_found);
    if (nexamples > 0) tcase_add_loop_test(tc, doc_example_works, 0, nexamples);
    tcase_add_test(tc, unquoted_conditional_gets_quoting_advice);
    tcase_add_test(tc, other_syntax_errors_get_no_advice);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
