package dev.rdmarun.runtime;

/**
 * RTR→RTS: this side's send PSN and, for RC, the ACK timeout (4.096 us * 2^timeout), how often to
 * retry on timeout and on RNR NAK (7 = forever for rnr_retry), and the outgoing READ/atomic depth.
 */
public record RtsAttributes(int sqPsn, int timeout, int retryCount, int rnrRetry, int maxRdAtomic) {
    public RtsAttributes {
        if (sqPsn < 0 || sqPsn > 0xffffff) throw new IllegalArgumentException("PSN is 24 bits");
        if (timeout < 0 || timeout > 31) throw new IllegalArgumentException("timeout is 0..31");
        if (retryCount < 0 || retryCount > 7) throw new IllegalArgumentException("retry_cnt is 0..7");
        if (rnrRetry < 0 || rnrRetry > 7) throw new IllegalArgumentException("rnr_retry is 0..7");
    }

    /** ibv_rc_pingpong's values: timeout 14 (~67 ms), retry 7, rnr_retry 7, 1 outstanding READ/atomic. */
    public static RtsAttributes of(int sqPsn) {
        return new RtsAttributes(sqPsn, 14, 7, 7, 1);
    }

    public RtsAttributes withRnrRetry(int n) {
        return new RtsAttributes(sqPsn, timeout, retryCount, n, maxRdAtomic);
    }

    public RtsAttributes withRetry(int timeout, int retryCount) {
        return new RtsAttributes(sqPsn, timeout, retryCount, rnrRetry, maxRdAtomic);
    }

    public RtsAttributes withMaxRdAtomic(int n) {
        return new RtsAttributes(sqPsn, timeout, retryCount, rnrRetry, n);
    }
}
