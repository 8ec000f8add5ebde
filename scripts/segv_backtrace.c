/* LD_PRELOAD diagnostic: on SIGSEGV/SIGBUS/SIGABRT print the native stack (with the library and nearest symbol of
   each frame) to stderr, then die with the signal. Build: cc -shared -fPIC -O1 -o /tmp/segv_bt.so segv_backtrace.c */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_signal(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    void *frames[64];
    int n = backtrace(frames, 64);
    fprintf(stderr, "\n=== segv_backtrace: signal %d (%s) at address %p, %d frames\n", sig, strsignal(sig),
            info ? info->si_addr : NULL, n);
    for (int i = 0; i < n; ++i) {
        Dl_info d;
        memset(&d, 0, sizeof d);
        dladdr(frames[i], &d);
        fprintf(stderr, "#%-2d %p %s(%s+0x%lx) [base+0x%lx]\n", i, frames[i], d.dli_fname ? d.dli_fname : "?",
                d.dli_sname ? d.dli_sname : "?",
                d.dli_saddr ? (unsigned long)((char *)frames[i] - (char *)d.dli_saddr) : 0UL,
                d.dli_fbase ? (unsigned long)((char *)frames[i] - (char *)d.dli_fbase) : 0UL);
    }
    fflush(stderr);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
}
