/* test_fuzz_regressions.c — replays every committed fuzzing input through its harness under
 * the ordinary build (and, in CI, under the ASan/UBSan build): the crash and invariant
 * failures found so far (tests/fuzz/regressions/<harness>/), the seed corpora
 * (tests/fuzz/corpus/<harness>/) and the shipped pipelines (the .yaml files of pipelines/, through the
 * loader harness). A harness aborts on a failed invariant, which fails the test case.
 *
 * The harnesses are included, not linked: each is one file meant for libFuzzer, and
 * SL_FUZZ_NO_MAIN leaves out its LLVMFuzzerTestOneInput so all four fit in one program. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define SL_FUZZ_NO_MAIN
#include "fuzz/fuzz_expr.c"
#include "fuzz/fuzz_io.c"
#include "fuzz/fuzz_pipeline.c"
#include "fuzz/fuzz_session.c"

typedef int (*harness_fn)(const uint8_t *data, size_t size);

static uint8_t *read_whole(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    *size = n;
    return buf;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs every regular file of dir (those ending in `suffix`, when given) through fn. A missing
 * directory counts as empty. Returns how many inputs ran. */
static int replay_dir(const char *dir, const char *suffix, harness_fn fn) {
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) return 0;
    int ran = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name), slen = suffix ? strlen(suffix) : 0;
        bool wanted = name[0] != '.' && (!suffix || (len > slen && !strcmp(name + len - slen, suffix)));
        if (wanted) {
            char path[4096];
            int plen = snprintf(path, sizeof path, "%s/%s", dir, name);
            ck_assert_msg(plen > 0 && (size_t)plen < sizeof path, "path too long: %s/%s", dir, name);
            size_t size = 0;
            uint8_t *data = read_whole(path, &size);
            ck_assert_msg(data != NULL, "cannot read %s", path);
            fprintf(stderr, "replaying %s\n", path);
            fn(data, size);
            free(data);
            ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

static void replay_harness(const char *harness, harness_fn fn) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", SLUICE_SOURCE_DIR, harness);
    int seeds = replay_dir(dir, NULL, fn);
    ck_assert_msg(seeds > 0, "no seed corpus in %s", dir);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regressions/%s", SLUICE_SOURCE_DIR, harness);
    replay_dir(dir, NULL, fn);
}

START_TEST(replay_io) { replay_harness("io", sl_fuzz_io); }
END_TEST

START_TEST(replay_expr) { replay_harness("expr", sl_fuzz_expr); }
END_TEST

START_TEST(replay_pipeline) {
    replay_harness("pipeline", sl_fuzz_pipeline);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pipelines", SLUICE_SOURCE_DIR);
    replay_dir(dir, ".yaml", sl_fuzz_pipeline);
}
END_TEST

START_TEST(replay_session) { replay_harness("session", sl_fuzz_session); }
END_TEST

static Suite *make_suite(void) {
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = tcase_create("replay");
    tcase_add_test(tc, replay_io);
    tcase_add_test(tc, replay_expr);
    tcase_add_test(tc, replay_pipeline);
    tcase_add_test(tc, replay_session);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(make_suite()); }
