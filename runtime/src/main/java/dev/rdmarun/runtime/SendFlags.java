package dev.rdmarun.runtime;

/** enum ibv_send_flags, as bits for the allocation-free post methods. */
public final class SendFlags {
    public static final int NONE = 0;
    public static final int FENCE = 1;
    public static final int SIGNALED = 2;
    public static final int SOLICITED = 4;
    public static final int INLINE = 8;

    private SendFlags() {}
}
