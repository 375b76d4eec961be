/* main.c — the `sluice` program: finds the subcommand and hands it the rest of the command
 * line; `sluice help`, `--version` and `COMMAND --help` are answered here. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const sl_command *const commands[] = {
    &sl_command_run, &sl_command_check, &sl_command_explain, &sl_command_gen, &sl_command_bench,
};

static void print_overview(FILE *out) {
    fprintf(out,
            "sluice %s — fused stream processing of columns (scan, compact, segmented scan, "
            "sort) on CUDA or the CPU\n\n"
            "usage: sluice COMMAND [ARGS]\n\ncommands:\n",
            sluice_version_string());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out,
            "  help     this text; `sluice help COMMAND` or `sluice COMMAND --help` for one\n\n"
            "exit status: 0 success, 1 an error in the pipeline or the data (diagnostics on "
            "stderr), 2 a usage error\n");
}

static void print_command_help(const sl_command *c) {
    printf("usage: sluice %s %s\n\n%s\n\n%s", c->name, c->usage, c->summary, c->help);
    /* A command whose help lists its own exit statuses (run: signals too) keeps them. */
    if (!strstr(c->help, "exit status"))
        printf("\nexit status: 0 success, 1 an error in the pipeline or the data (diagnostics "
               "on stderr), 2 a usage error\n");
}

static const sl_command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

/* "sluice: no command 'rnu' (did you mean 'run'?)", then the overview. */
static int no_command(const char *who, const char *name) {
    const char *names[sizeof commands / sizeof commands[0] + 1];
    size_t n = 0;
    for (; n < sizeof commands / sizeof commands[0]; n++) names[n] = commands[n]->name;
    names[n++] = "help";
    const char *hint = sl_closest(name, names, n);
    if (hint)
        fprintf(stderr, "%s: no command '%s' (did you mean '%s'?)\n\n", who, name, hint);
    else
        fprintf(stderr, "%s: no command '%s'\n\n", who, name);
    print_overview(stderr);
    return SL_EXIT_USAGE;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_overview(stderr);
        return SL_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("sluice %s\n", sluice_version_string());
        return SL_EXIT_OK;
    }
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        if (argc > 2) {
            const sl_command *c = find_command(argv[2]);
            if (!c) return no_command("sluice help", argv[2]);
            print_command_help(c);
            return SL_EXIT_OK;
        }
        print_overview(stdout);
        return SL_EXIT_OK;
    }
    const sl_command *c = find_command(name);
    if (!c) return no_command("sluice", name);
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_command_help(c);
            return SL_EXIT_OK;
        }
    }
    return c->main(c, argc - 1, argv + 1);
}
