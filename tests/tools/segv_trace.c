/* segv_trace.c — a preloadable crash reporter for runs on machines without a debugger (the
 * lent GPU machine has no gdb): LD_PRELOAD=libsluice_segv_trace.so PROGRAM ... prints, on
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, the stack as "module(+offset)" frames on
 * stderr, then dies of the same signal. scripts/segv_resolve.sh turns the frames into
 * function and line with addr2line (build with -g for lines). Test tooling only: never
 * linked into the library. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void say(const char *text) {
    ssize_t left = (ssize_t)strlen(text);
    while (left > 0) {
        ssize_t n = write(STDERR_FILENO, text, (size_t)left);
        if (n <= 0) return;
        text += n;
        left -= n;
    }
}

static void on_fatal(int sig) {
    void *frames[96];
    int n = backtrace(frames, 96);
    say("\n== segv_trace: fatal signal ");
    say(strsignal(sig));
    say(", stack (innermost first):\n");
    backtrace_symbols_fd(frames, n, STDERR_FILENO); /* async-signal-safe: no malloc */
    say("== segv_trace: end of stack\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    void *warm[1];
    backtrace(warm, 1); /* loads libgcc's unwinder now, not inside the handler */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(sigs[i], &sa, NULL);
    }
}
