/* test_diagnostics.c — every loader diagnostic: its status, its line:column, a fragment of
 * its message (did-you-mean included), several problems reported from one file, no cascades
 * from a failed definition, and the hostile-input limits. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static sluice_context *ctx;

static void setup(void) { ck_assert_int_eq(sluice_context_create(&ctx, NULL), SLUICE_OK); }
static void teardown(void) { sluice_context_destroy(ctx); }

/* Loads `yaml` expecting failure; checks the first diagnostic. */
static void expect(const char *yaml, sluice_status status, int line, int col, const char *fragment) {
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "bad.yaml", &p);
    if (st != status) tu_print_diags(ctx);
    ck_assert_msg(st == status, "status %s, want %s for:\n%s", sluice_status_name(st),
                  sluice_status_name(status), yaml);
    ck_assert_ptr_null(p);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->status, status);
    if (line) {
        ck_assert_msg(d->line == line && d->column == col, "at %d:%d, want %d:%d: %s", d->line,
                      d->column, line, col, d->message);
        ck_assert_str_eq(d->file, "bad.yaml");
        ck_assert_ptr_nonnull(d->source_line);
    }
    ck_assert_msg(strstr(d->message, fragment), "message '%s' lacks '%s'", d->message, fragment);
}

START_TEST(file_errors) {
    sluice_pipeline *p = NULL;
    ck_assert_int_eq(sluice_pipeline_load_file(ctx, SLUICE_SOURCE_DIR "/pipelines", &p),
                     SLUICE_ERR_IO);
    ck_assert_ptr_null(p);
    const char *msg = sluice_context_diagnostic(ctx, 0)->message;
    ck_assert_msg(strstr(msg, "is a directory, not a pipeline file"), "message: %s", msg);
    ck_assert_int_eq(sluice_pipeline_load_file(ctx, SLUICE_SOURCE_DIR "/no/such.yaml", &p),
                     SLUICE_ERR_IO);
    msg = sluice_context_diagnostic(ctx, 0)->message;
    ck_assert_msg(strstr(msg, "cannot open") && strstr(msg, "No such file"), "message: %s", msg);
}
END_TEST

#define HEAD "sluice: 1\nname: t\ninput: {x: f32, k: i32, f: bool}\nstages:\n"

START_TEST(yaml_syntax) {
    expect("sluice: 1\nname: [unclosed\ninput: {x: f32}\n", SLUICE_ERR_YAML_SYNTAX, 3, 6,
           "YAML syntax error");
    expect("sluice: 1\n\tname: t\n", SLUICE_ERR_YAML_SYNTAX, 2, 1, "YAML syntax error");
    expect("sluice: 1\n---\nsluice: 1\n", SLUICE_ERR_YAML_SYNTAX, 2, 1, "one YAML document");
    expect("sluice: 1\nname: \"a\\0b\"\n", SLUICE_ERR_YAML_SYNTAX, 2, 7, "NUL character");
    expect("sluice: 1\nname: &n t\ninput: {x: f32}\nstages:\n  - map: {y: *n}\n",
           SLUICE_ERR_YAML_SYNTAX, 5, 14, "aliases");
}
END_TEST

START_TEST(schema_version) {
    expect("name: t\ninput: {x: f32}\nstages:\n  - map: {y: x}\n", SLUICE_ERR_SCHEMA_VERSION, 1, 1,
           "sluice: 1");
    expect("sluice: 2\nname: t\n", SLUICE_ERR_SCHEMA_VERSION, 1, 9, "unsupported schema version '2'");
    expect("", SLUICE_ERR_SCHEMA_VERSION, 1, 1, "empty");
    /* with an unknown version nothing else is reported */
    expect("sluice: 3\nbogus: 1\n", SLUICE_ERR_SCHEMA_VERSION, 1, 9, "version");
    ck_assert_uint_eq(sluice_context_diagnostic_count(ctx), 1);
}
END_TEST

START_TEST(missing_keys) {
    expect("sluice: 1\ninput: {x: f32}\nstages:\n  - map: {y: x}\n", SLUICE_ERR_MISSING_KEY, 1, 1,
           "'name'");
    expect("sluice: 1\nname: t\nstages:\n  - map: {y: x}\n", SLUICE_ERR_MISSING_KEY, 1, 1,
           "'input'");
    expect("sluice: 1\nname: t\ninput: {x: f32}\n", SLUICE_ERR_MISSING_KEY, 1, 1, "'stages'");
    expect(HEAD "  - scan: {of: x, into: s}\n", SLUICE_ERR_MISSING_KEY, 5, 5, "'op'");
    expect(HEAD "  - scan: {of: x, op: sum}\n", SLUICE_ERR_MISSING_KEY, 5, 5, "'into'");
    expect(HEAD "  - segmented_scan: {of: x, op: sum, into: s}\n", SLUICE_ERR_MISSING_KEY, 5, 5,
           "'segments'");
    expect("sluice: 1\nname: t\nparams:\n  r: {type: f32}\ninput: {x: f32}\nstages:\n"
           "  - map: {y: x}\n", SLUICE_ERR_MISSING_KEY, 4, 3, "'default'");
}
END_TEST

START_TEST(unknown_stage) {
    expect(HEAD "  - mapp: {y: x}\n", SLUICE_ERR_UNKNOWN_STAGE, 5, 5, "did you mean 'map'?");
    expect(HEAD "  - segmented_scn: {of: x, op: sum, into: s, segments: f}\n",
           SLUICE_ERR_UNKNOWN_STAGE, 5, 5, "did you mean 'segmented_scan'?");
    expect(HEAD "  - explode: {y: x}\n", SLUICE_ERR_UNKNOWN_STAGE, 5, 5, "unknown stage 'explode'");
}
END_TEST

START_TEST(unknown_key) {
    expect(HEAD "  - scan: {off: x, op: sum, into: s}\n", SLUICE_ERR_UNKNOWN_KEY, 5, 12,
           "did you mean 'of'?");
    expect(HEAD "  - sort: {key: x, ordr: descending}\n", SLUICE_ERR_UNKNOWN_KEY, 5, 20,
           "did you mean 'order'?");
    expect("sluice: 1\nname: t\ninputs: {x: f32}\n", SLUICE_ERR_UNKNOWN_KEY, 3, 1,
           "did you mean 'input'?");
    expect(HEAD "  - scan: {op: count, of: x, into: n}\n", SLUICE_ERR_UNKNOWN_KEY, 5, 23,
           "count");
    expect(HEAD "  - compact: {by: f, zzzzzz: 1}\n", SLUICE_ERR_UNKNOWN_KEY, 5, 22,
           "its keys are: by, columns");
}
END_TEST

START_TEST(duplicate_key) {
    expect("sluice: 1\nname: t\nname: u\ninput: {x: f32}\nstages:\n  - map: {y: x}\n",
           SLUICE_ERR_DUPLICATE_KEY, 3, 1, "key 'name' is given twice");
    expect(HEAD "  - scan: {of: x, op: sum, op: max, into: s}\n", SLUICE_ERR_DUPLICATE_KEY, 5, 28,
           "first at line 5");
}
END_TEST

START_TEST(duplicate_column) {
    expect(HEAD "  - map: {y: x + 1.0}\n  - map: {y: x * 2.0}\n", SLUICE_ERR_DUPLICATE_COLUMN, 6,
           11, "column 'y' is already defined (line 5)");
    expect(HEAD "  - scan: {of: x, op: sum, into: k}\n", SLUICE_ERR_DUPLICATE_COLUMN, 5, 34,
           "'k' is already defined");
    expect("sluice: 1\nname: t\nparams:\n  x: {type: f32, default: 1}\ninput: {x: f32}\n"
           "stages:\n  - map: {y: x}\n", SLUICE_ERR_DUPLICATE_COLUMN, 5, 9, "already a param");
}
END_TEST

START_TEST(unknown_column) {
    expect(HEAD "  - compact: {by: ff}\n", SLUICE_ERR_UNKNOWN_COLUMN, 5, 19,
           "unknown column 'ff'");
    expect(HEAD "  - compact: {by: ff}\n", SLUICE_ERR_UNKNOWN_COLUMN, 5, 19, "did you mean 'f'?");
    expect(HEAD "  - sort: {key: xx}\n", SLUICE_ERR_UNKNOWN_COLUMN, 5, 17, "did you mean 'x'?");
    /* a column dropped by a compact says so */
    expect(HEAD "  - compact: {by: f, columns: [x]}\n  - sort: {key: k}\n",
           SLUICE_ERR_UNKNOWN_COLUMN, 6, 17, "line 5 dropped it");
    /* offsets inputs are not columns of rows */
    expect("sluice: 1\nname: t\ninput: {x: f32, rows: {type: i64, role: offsets}}\nstages:\n"
           "  - map: {y: x + f32(rows)}\n", SLUICE_ERR_UNKNOWN_COLUMN, 5, 22,
           "'rows' is an offsets input");
    expect("sluice: 1\nname: t\ninput: {x: f32, rows: {type: i64, role: offsets}}\nstages:\n"
           "  - sort: {key: rows}\n", SLUICE_ERR_TYPE, 5, 17, "'rows' is an offsets input");
    /* and inside an expression */
    expect(HEAD "  - sort: {key: x, values: [f]}\n  - map: {y: x + f32(k)}\n",
           SLUICE_ERR_UNKNOWN_COLUMN, 6, 22, "the stage at line 5 dropped it");
}
END_TEST

START_TEST(unknown_name_in_expression) {
    /* inside an expression the column is that of the name in the file */
    sluice_pipeline *p = NULL;
    const char *yaml = HEAD "  - map: {y: x * scale + kk}\n";
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "bad.yaml", &p);
    ck_assert(st == SLUICE_ERR_UNKNOWN_COLUMN || st == SLUICE_ERR_UNKNOWN_PARAM);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_int_eq(d->line, 5);
    ck_assert_int_eq(d->column, 18);
    ck_assert_ptr_nonnull(strstr(d->message, "scale"));
}
END_TEST

START_TEST(unknown_param) {
    sluice_pipeline *p = NULL;
    const char *yaml = "sluice: 1\nname: t\nparams:\n  radius: {type: f32, default: 1}\n"
                       "input: {x: f32}\nstages:\n  - filter: x < radiuss\n";
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "bad.yaml", &p);
    ck_assert(st == SLUICE_ERR_UNKNOWN_PARAM || st == SLUICE_ERR_UNKNOWN_COLUMN);
    const sluice_diagnostic *d = sluice_context_diagnostic(ctx, 0);
    ck_assert_int_eq(d->line, 7);
    ck_assert_int_eq(d->column, 17);
    ck_assert_ptr_nonnull(strstr(d->message, "radius"));
}
END_TEST

START_TEST(type_errors) {
    expect(HEAD "  - compact: {by: k}\n", SLUICE_ERR_TYPE, 5, 19, "must be a bool column");
    expect(HEAD "  - scan: {of: x, op: xor, into: s}\n", SLUICE_ERR_TYPE, 5, 16,
           "not defined on f32");
    expect(HEAD "  - sort: {key: k, bits: [0, 40]}\n", SLUICE_ERR_TYPE, 5, 30,
           "go past the 32 bits of key 'k'");
    expect(HEAD "  - sort: {key: k, bits: [8, 8]}\n", SLUICE_ERR_TYPE, 5, 26, "empty range");
    expect(HEAD "  - sort: {key: f}\n", SLUICE_ERR_TYPE, 5, 17, "integer or float");
    expect(HEAD "  - scan: {op: linrec, a: f, b: x, into: h}\n", SLUICE_ERR_TYPE, 5, 27,
           "a is bool");
    expect(HEAD "  - flag: {g: x + 1.0}\n", SLUICE_ERR_TYPE, 5, 15, "must be a predicate");
    expect(HEAD "  - filter: k + 1\n", SLUICE_ERR_TYPE, 5, 13, "must be bool");
    expect(HEAD "  - segmented_scan: {of: x, op: sum, into: s, segments: k}\n", SLUICE_ERR_TYPE,
           5, 57, "{key: k}");
    expect("sluice: 1\nname: t\ninput: {x: f33}\nstages:\n  - map: {y: x}\n", SLUICE_ERR_TYPE, 3,
           12, "did you mean 'f32'?");
    expect("sluice: 1\nname: t\ninput: {o: {type: i32, role: offsets}, x: f32}\nstages:\n"
           "  - map: {y: x}\n", SLUICE_ERR_TYPE, 3, 19, "must be i64");
}
END_TEST

START_TEST(unsafe_accumulators) {
    expect(HEAD "  - scan: {of: x, op: sum, into: s, acc: i64}\n", SLUICE_ERR_TYPE, 5, 42,
           "acc i64 is unsafe for sum over f32");
    expect(HEAD "  - scan: {of: k, op: sum, into: s, acc: i16}\n", SLUICE_ERR_TYPE, 5, 42,
           "narrower");
    expect(HEAD "  - scan: {of: x, op: sum, into: s, acc: f16}\n", SLUICE_ERR_TYPE, 5, 42,
           "never narrower than f32");
    expect(HEAD "  - scan: {of: k, op: sum, into: s, acc: f32}\n", SLUICE_ERR_TYPE, 5, 42,
           "exactly");
    expect(HEAD "  - scan: {of: k, op: sum, into: s, acc: u64}\n", SLUICE_ERR_TYPE, 5, 42,
           "negative");
    expect(HEAD "  - scan: {op: count, into: s, acc: i32}\n", SLUICE_ERR_TYPE, 5, 37, "i64 or u64");
}
END_TEST

START_TEST(expression_syntax) {
    /* the column points inside the expression, at the offending token */
    expect(HEAD "  - map: {y: x * * 2.0}\n", SLUICE_ERR_EXPR_SYNTAX, 5, 18, "");
    expect(HEAD "  - map:\n      y: \"(x + 1.0\"\n", SLUICE_ERR_EXPR_SYNTAX, 0, 0, "");
    ck_assert_int_eq(sluice_context_diagnostic(ctx, 0)->line, 6);
    ck_assert_int_gt(sluice_context_diagnostic(ctx, 0)->column, 9);
    expect(HEAD "  - map: {y: }\n", SLUICE_ERR_EXPR_SYNTAX, 5, 14, "empty expression");
    /* quoted and block scalars: positions inside the text as written */
    expect(HEAD "  - map: {y: 'x * * 2.0'}\n", SLUICE_ERR_EXPR_SYNTAX, 5, 19, "");
    expect(HEAD "  - map:\n      y: |\n        x * * 2.0\n", SLUICE_ERR_EXPR_SYNTAX, 7, 13, "");
    expect(HEAD "  - map:\n      y: |\n\n        x * * 2.0\n", SLUICE_ERR_EXPR_SYNTAX, 8, 13, "");
}
END_TEST

static const char *op_yaml(const char *combine_a, const char *identity) {
    static char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "sluice: 1\nname: t\ninput: {x: f32}\n"
             "operators:\n"
             "  weird:\n"
             "    state: {a: f32}\n"
             "    identity: %s\n"
             "    combine:\n"
             "      a: %s\n"
             "stages:\n  - scan: {op: weird, of: {a: x}, into: {a: y}}\n",
             identity, combine_a);
    return yaml;
}

START_TEST(operator_not_associative) {
    expect(op_yaml("l.a - r.a", "{a: 0.0}"), SLUICE_ERR_NOT_ASSOCIATIVE, 5, 3,
           "operator 'weird' is not associative");
    ck_assert_ptr_nonnull(strstr(sluice_context_diagnostic(ctx, 0)->message, "(a op b) op c = {a: "));
    expect(op_yaml("(l.a + r.a) / 2.0", "{a: 0.0}"), SLUICE_ERR_NOT_ASSOCIATIVE, 5, 3,
           "not associative");
    /* in every float format, despite the tolerance for rounding */
    const char *formats[] = {"f16", "f64"};
    for (int i = 0; i < 2; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "sluice: 1\nname: t\ninput: {x: f32}\noperators:\n"
                 "  minus: {state: {s: %s}, identity: {s: 0}, combine: {s: l.s - r.s}}\n"
                 "stages:\n  - scan: {op: minus, of: {s: x}, into: {s: y}}\n", formats[i]);
        expect(yaml, SLUICE_ERR_NOT_ASSOCIATIVE, 5, 3, "operator 'minus' is not associative");
    }
    /* integer subtraction too, exactly */
    expect("sluice: 1\nname: t\ninput: {x: i32}\noperators:\n  sub:\n    state: {v: i32}\n"
           "    identity: {v: 0}\n    combine: {v: l.v - r.v}\nstages:\n"
           "  - scan: {op: sub, of: {v: x}, into: {v: y}}\n",
           SLUICE_ERR_NOT_ASSOCIATIVE, 5, 3, "with a = {v: ");
}
END_TEST

START_TEST(operator_bad_identity) {
    expect(op_yaml("l.a + r.a", "{a: 1.0}"), SLUICE_ERR_BAD_IDENTITY, 7, 15,
           "identity {a: 1} of operator 'weird' is not an identity");
    expect(op_yaml("max(l.a, r.a)", "{a: 0.0}"), SLUICE_ERR_BAD_IDENTITY, 7, 15, "not an identity");
    /* the affine operator with a wrong identity */
    expect("sluice: 1\nname: t\ninput: {x: f32}\noperators:\n  affine:\n"
           "    state: {a: f32, b: f32}\n    identity: {a: 1.0, b: 1.0}\n"
           "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\nstages:\n"
           "  - scan: {op: affine, of: {a: x, b: x}, into: {b: h}}\n",
           SLUICE_ERR_BAD_IDENTITY, 7, 15, "not an identity");
}
END_TEST

START_TEST(operator_declaration_errors) {
    expect(op_yaml("l.a + x", "{a: 0.0}"), SLUICE_ERR_UNKNOWN_COLUMN, 9, 16, "");
    expect(op_yaml("l.a + r.b", "{a: 0.0}"), SLUICE_ERR_UNKNOWN_COLUMN, 9, 16, "");
    expect(op_yaml("l.a + r.a", "{b: 0.0}"), SLUICE_ERR_UNKNOWN_KEY, 7, 16, "is not one of the state fields");
    expect("sluice: 1\nname: t\ninput: {x: f32}\noperators:\n  sum:\n    state: {a: f32}\n"
           "    identity: {a: 0}\n    combine: {a: l.a + r.a}\nstages:\n  - map: {y: x}\n",
           SLUICE_ERR_BAD_VALUE, 5, 3, "builtin operator");
    /* a scan with a declared operator names every field in of, only fields in into */
    const char *affine = "sluice: 1\nname: t\ninput: {x: f32}\noperators:\n  affine:\n"
                         "    state: {a: f32, b: f32}\n    identity: {a: 1.0, b: 0.0}\n"
                         "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\nstages:\n";
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "%s  - scan: {op: affine, of: {a: x}, into: {b: h}}\n", affine);
    expect(yaml, SLUICE_ERR_MISSING_KEY, 10, 28, "needs a value for state field 'b'");
    snprintf(yaml, sizeof yaml, "%s  - scan: {op: affine, of: {a: x, b: x}, into: {c: h}}\n",
             affine);
    expect(yaml, SLUICE_ERR_UNKNOWN_KEY, 10, 49, "'c' in into is not one of the state fields");
    snprintf(yaml, sizeof yaml, "%s  - scan: {op: affine, of: x, into: {b: h}}\n", affine);
    expect(yaml, SLUICE_ERR_BAD_VALUE, 10, 28, "maps each state field");
}
END_TEST

START_TEST(unknown_operator) {
    expect(HEAD "  - scan: {of: x, op: summ, into: s}\n", SLUICE_ERR_UNKNOWN_OPERATOR, 5, 23,
           "did you mean 'sum'?");
    expect("sluice: 1\nname: t\ninput: {x: f32}\noperators:\n  affine:\n"
           "    state: {a: f32, b: f32}\n    identity: {a: 1.0, b: 0.0}\n"
           "    combine: {a: l.a * r.a, b: r.a * l.b + r.b}\nstages:\n"
           "  - scan: {op: afine, of: {a: x, b: x}, into: {b: h}}\n",
           SLUICE_ERR_UNKNOWN_OPERATOR, 10, 16, "did you mean 'affine'?");
}
END_TEST

START_TEST(unknown_output) {
    expect(HEAD "  - map: {y: x}\noutput: [y, yy, x]\n", SLUICE_ERR_UNKNOWN_OUTPUT, 6, 13,
           "unknown output column 'yy'");
    expect(HEAD "  - map: {y: x}\noutput: [yz]\n", SLUICE_ERR_UNKNOWN_OUTPUT, 6, 10,
           "did you mean 'y'?");
    expect(HEAD "  - sort: {key: x, values: [k]}\noutput: [f]\n", SLUICE_ERR_UNKNOWN_OUTPUT, 6, 10,
           "line 5 dropped it");
}
END_TEST

START_TEST(bad_values) {
    expect(HEAD "  - sort: {key: x, order: sideways}\n", SLUICE_ERR_BAD_VALUE, 5, 27,
           "order 'sideways' is not one of ascending or descending");
    expect(HEAD "  - scan: {of: x, op: sum, kind: both, into: s}\n", SLUICE_ERR_BAD_VALUE, 5, 34,
           "kind 'both'");
    expect(HEAD "  - scan: {of: x, op: sum, reset: batchh, into: s}\n", SLUICE_ERR_BAD_VALUE, 5,
           35, "did you mean 'batch'?");
    expect(HEAD "  - sort: {key: x, per: forever}\n", SLUICE_ERR_BAD_VALUE, 5, 25, "per 'forever'");
    expect(HEAD "  - map: {bad-name: x}\n", SLUICE_ERR_BAD_VALUE, 5, 11, "not a valid column name");
    expect(HEAD "  - sort: {key: x, bits: [1]}\n", SLUICE_ERR_BAD_VALUE, 5, 26, "[lo, hi]");
    expect(HEAD "  - filter: {x: 1}\n", SLUICE_ERR_BAD_VALUE, 5, 13, "one predicate");
    expect(HEAD "  - compact: f\n", SLUICE_ERR_BAD_VALUE, 5, 14, "takes a mapping");
    expect("sluice: 1\nname: t\ninput: {x: f32}\nstages:\n  - scan:\n    of: x\n",
           SLUICE_ERR_BAD_VALUE, 6, 5, "indent it under 'scan:'");
    expect("sluice: 1\nname: t\ninput: {x: f32}\ndeterminism: always\nstages:\n  - map: {y: x}\n",
           SLUICE_ERR_BAD_VALUE, 4, 14, "determinism");
    expect("sluice: 1\nname: \"\"\ninput: {x: f32}\nstages:\n  - map: {y: x}\n",
           SLUICE_ERR_BAD_VALUE, 2, 7, "name must not be empty");
    expect("sluice: 1\nname: t\nparams:\n  r: {type: i8, default: 300}\ninput: {x: f32}\n"
           "stages:\n  - map: {y: x}\n", SLUICE_ERR_BAD_VALUE, 4, 26, "not a valid i8");
    /* offsets describe the input rows: not valid after a stage that changed them */
    expect("sluice: 1\nname: t\ninput: {x: f32, rows: {type: i64, role: offsets}}\nstages:\n"
           "  - filter: x > 0.0\n"
           "  - segmented_scan: {of: x, op: sum, into: s, segments: rows}\n",
           SLUICE_ERR_BAD_VALUE, 6, 57, "the filter at line 5 changed the rows");
}
END_TEST

START_TEST(many_errors_in_one_file) {
    const char *yaml = "sluice: 1\n"                                  /* 1 */
                       "name: many\n"                                 /* 2 */
                       "input: {x: f32, k: i32}\n"                    /* 3 */
                       "stages:\n"                                    /* 4 */
                       "  - mapp: {y: x}\n"                           /* 5 unknown stage */
                       "  - compact: {by: k}\n"                       /* 6 type */
                       "  - scan: {of: x, op: sum, into: s, acc: i8}\n" /* 7 unsafe acc */
                       "  - sort: {key: x, order: up}\n"              /* 8 bad value */
                       "output: [nope]\n";                            /* 9 unknown output */
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "many.yaml", &p);
    ck_assert_int_eq(st, SLUICE_ERR_UNKNOWN_STAGE);
    ck_assert_uint_eq(sluice_context_diagnostic_count(ctx), 5);
    const sluice_status want[] = {SLUICE_ERR_UNKNOWN_STAGE, SLUICE_ERR_TYPE, SLUICE_ERR_TYPE,
                                  SLUICE_ERR_BAD_VALUE, SLUICE_ERR_UNKNOWN_OUTPUT};
    for (int i = 0; i < 5; i++) {
        const sluice_diagnostic *d = sluice_context_diagnostic(ctx, (size_t)i);
        ck_assert_int_eq(d->status, want[i]);
        ck_assert_int_eq(d->line, 5 + i);
    }
    char buf[1024];
    sluice_diagnostic_format(sluice_context_diagnostic(ctx, 0), buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "many.yaml:5:5: error: unknown stage 'mapp'"));
    ck_assert_ptr_nonnull(strstr(buf, "  - mapp: {y: x}\n"));
    ck_assert_ptr_nonnull(strstr(buf, "      ^"));
}
END_TEST

START_TEST(no_cascade_from_failed_definition) {
    /* y's definition fails; its users (z, the compact, the scan, the output) stay silent */
    const char *yaml = HEAD "  - map: {y: x * * 1.0}\n"
                            "  - map: {z: y * 2.0}\n"
                            "  - flag: {keep: z > 0.0}\n"
                            "  - compact: {by: keep}\n"
                            "  - scan: {of: z, op: sum, into: s}\n"
                            "  - map: {w: x + q}\n" /* a real, independent error */
                            "output: [y, z, s]\n";
    sluice_pipeline *p = NULL;
    sluice_status st = sluice_pipeline_load_string(ctx, yaml, strlen(yaml), "c.yaml", &p);
    if (sluice_context_diagnostic_count(ctx) != 2) tu_print_diags(ctx);
    ck_assert_int_eq(st, SLUICE_ERR_EXPR_SYNTAX);
    ck_assert_uint_eq(sluice_context_diagnostic_count(ctx), 2);
    ck_assert_int_eq(sluice_context_diagnostic(ctx, 1)->line, 10);
    /* a failed scan (unknown op) still defines its column silently */
    const char *yaml2 = HEAD "  - scan: {of: x, op: summ, into: s}\n  - map: {t: s + 1.0}\n";
    st = sluice_pipeline_load_string(ctx, yaml2, strlen(yaml2), "c.yaml", &p);
    ck_assert_int_eq(st, SLUICE_ERR_UNKNOWN_OPERATOR);
    ck_assert_uint_eq(sluice_context_diagnostic_count(ctx), 1);
}
END_TEST

START_TEST(limit_nesting_depth) {
    char yaml[4096] = "sluice: 1\nname: t\ninput: {x: f32}\nstages:\n  - map: {y: x}\nextra: ";
    for (int i = 0; i < 40; i++) strcat(yaml, "[");
    for (int i = 0; i < 40; i++) strcat(yaml, "]");
    strcat(yaml, "\n");
    expect(yaml, SLUICE_ERR_LIMIT, 6, 8 + 31, "nesting deeper than 32");
}
END_TEST

START_TEST(limit_columns) {
    size_t cap = 64 * 1100;
    char *yaml = malloc(cap);
    strcpy(yaml, "sluice: 1\nname: t\ninput:\n");
    for (int i = 0; i < 1030; i++) snprintf(yaml + strlen(yaml), cap - strlen(yaml), "  c%d: f32\n", i);
    strcat(yaml, "stages:\n  - map: {y: c0}\n");
    expect(yaml, SLUICE_ERR_LIMIT, 3 + 1025, 3, "at most 1024 columns");
    /* past a size limit nothing else is checked or reported */
    ck_assert_uint_eq(sluice_context_diagnostic_count(ctx), 1);
    free(yaml);
}
END_TEST

START_TEST(limit_stages) {
    size_t cap = 64 * 300;
    char *yaml = malloc(cap);
    strcpy(yaml, "sluice: 1\nname: t\ninput: {x: f32}\nstages:\n");
    for (int i = 0; i < 300; i++) strcat(yaml, "  - sort: {key: x}\n");
    expect(yaml, SLUICE_ERR_LIMIT, 5, 3, "at most 256");
    free(yaml);
}
END_TEST

START_TEST(limit_problem_count) {
    /* 5000 problems: the first 100 are kept, one more entry says there were more */
    size_t cap = 64 * 5100;
    char *yaml = malloc(cap);
    strcpy(yaml, "sluice: 1\nname: t\ninput: {x: f32}\nstages:\n  - map:\n");
    for (int i = 0; i < 5000; i++)
        snprintf(yaml + strlen(yaml), cap - strlen(yaml), "      c%d: x + nope%d\n", i, i);
    expect(yaml, SLUICE_ERR_UNKNOWN_COLUMN, 6, 15, "nope0");
    ck_assert_uint_eq(sluice_context_diagnostic_count(ctx), 101);
    ck_assert_int_eq(sluice_context_diagnostic(ctx, 100)->status, SLUICE_ERR_LIMIT);
    free(yaml);
}
END_TEST

START_TEST(limit_file_size) {
    size_t n = (1u << 20) + 10;
    char *yaml = malloc(n + 1);
    memset(yaml, '#', n);
    yaml[n] = 0;
    expect(yaml, SLUICE_ERR_LIMIT, 0, 0, "limit");
    free(yaml);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("diagnostics");
    TCase *tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, yaml_syntax);
    tcase_add_test(tc, file_errors);
    tcase_add_test(tc, schema_version);
    tcase_add_test(tc, missing_keys);
    tcase_add_test(tc, unknown_stage);
    tcase_add_test(tc, unknown_key);
    tcase_add_test(tc, duplicate_key);
    tcase_add_test(tc, duplicate_column);
    tcase_add_test(tc, unknown_column);
    tcase_add_test(tc, unknown_name_in_expression);
    tcase_add_test(tc, unknown_param);
    tcase_add_test(tc, type_errors);
    tcase_add_test(tc, unsafe_accumulators);
    tcase_add_test(tc, expression_syntax);
    tcase_add_test(tc, operator_not_associative);
    tcase_add_test(tc, operator_bad_identity);
    tcase_add_test(tc, operator_declaration_errors);
    tcase_add_test(tc, unknown_operator);
    tcase_add_test(tc, unknown_output);
    tcase_add_test(tc, bad_values);
    tcase_add_test(tc, many_errors_in_one_file);
    tcase_add_test(tc, no_cascade_from_failed_definition);
    tcase_add_test(tc, limit_nesting_depth);
    tcase_add_test(tc, limit_columns);
    tcase_add_test(tc, limit_stages);
    tcase_add_test(tc, limit_problem_count);
    tcase_add_test(tc, limit_file_size);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
