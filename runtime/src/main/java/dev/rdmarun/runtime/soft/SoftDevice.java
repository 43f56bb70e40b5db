package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.Device;
import dev.rdmarun.runtime.SoftTransport;
import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * The software emulation as a device: RC queue pairs with the semantics of the IB spec (and of
 * rxe where the spec leaves a choice), moving data inside this JVM or over TCP to another
 * process's soft0. No kernel RDMA is involved, so it runs anywhere Java 25 runs on Linux.
 */
public final class SoftDevice extends Device {
    public static final String NAME = "soft0";
    static final SoftDevice INSTANCE = new SoftDevice();

    private SoftDevice() {
        super(NAME, guid());
    }

    /** A locally administered EUI-64 derived from the host name: stable per host, distinct between hosts. */
    private static long guid() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            host = "localhost";
        }
        long h = 1125899906842597L;
        for (int i = 0; i < host.length(); i++) h = 31 * h + host.charAt(i);
        return (h & 0x00ffffffffffffffL) | 0x0200000000000000L;
    }

    @Override
    public boolean isSoftware() {
        return true;
    }

    @Override
    public Context open(SoftTransport softTransport) {
        return SoftContext.open(this, softTransport);
    }
}
