/* The C side of DowncallBench (bench/jmh.sh): the physical limit a Java downcall is measured
 * against. Built by bench/pom.xml into target/native/librrbench.so. */
#include <time.h>

typedef int (*poll_fn)(void *cq, int num_entries, void *wc);

/* poll_cq's signature, doing nothing: on a machine without RDMA, the stand-in for a provider's
 * poll_cq on an empty CQ. */
int rr_noop_poll(void *cq, int num_entries, void *wc) {
    (void) cq;
    (void) num_entries;
    (void) wc;
    return 0;
}

/* Calls fn(cq, n, wc) count times through the pointer, as verbs.h's static inline ibv_poll_cq
 * does; returns the nanoseconds it took. The sum keeps the compiler from dropping the calls. */
long rr_call_loop(poll_fn fn, void *cq, int n, void *wc, long count) {
    struct timespec a, b;
    volatile int sink = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < count; i++) sink += fn(cq, n, wc);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
}
