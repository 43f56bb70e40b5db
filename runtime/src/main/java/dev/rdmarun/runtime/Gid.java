package dev.rdmarun.runtime;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.HexFormat;

/** A 128-bit GID (union ibv_gid), in network byte order. RoCE GIDs are IPv6 addresses or IPv4-mapped ones. */
public record Gid(byte[] raw) {
    public static final Gid ZERO = new Gid(new byte[16]);

    public Gid {
        if (raw.length != 16) throw new IllegalArgumentException("a GID has 16 bytes, not " + raw.length);
        raw = raw.clone();
    }

    public static Gid read(MemorySegment segment, long offset) {
        return new Gid(segment.asSlice(offset, 16).toArray(ValueLayout.JAVA_BYTE));
    }

    public void write(MemorySegment segment, long offset) {
        MemorySegment.copy(raw, 0, segment, ValueLayout.JAVA_BYTE, offset, 16);
    }

    /** Parses 32 hex digits, with or without ':' separators (the form show_gids and ibv_rc_pingpong use). */
    public static Gid parseHex(String text) {
        String hex = text.replace(":", "");
        if (hex.length() != 32) throw new IllegalArgumentException("not a GID: '" + text + "'");
        return new Gid(HexFormat.of().parseHex(hex));
    }

    @Override
    public byte[] raw() {
        return raw.clone();
    }

    public boolean isZero() {
        for (byte b : raw) if (b != 0) return false;
        return true;
    }

    /** True for ::ffff:a.b.c.d, the GID RoCE v2 gives an IPv4 address. */
    public boolean isIpv4Mapped() {
        for (int i = 0; i < 10; i++) if (raw[i] != 0) return false;
        return raw[10] == (byte) 0xff && raw[11] == (byte) 0xff;
    }

    /** Dotted IPv4 address of an IPv4-mapped GID, else null. */
    public String ipv4() {
        if (!isIpv4Mapped()) return null;
        return (raw[12] & 0xff) + "." + (raw[13] & 0xff) + "." + (raw[14] & 0xff) + "." + (raw[15] & 0xff);
    }

    /** 32 hex digits without separators: the wire form of ibv_rc_pingpong. */
    public String toHex() {
        return HexFormat.of().formatHex(raw);
    }

    /** show_gids form: eight groups of four hex digits. */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(39);
        String hex = toHex();
        for (int i = 0; i < 32; i += 4) {
            if (i > 0) sb.append(':');
            sb.append(hex, i, i + 4);
        }
        return sb.toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Gid g && Arrays.equals(raw, g.raw);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(raw);
    }
}
