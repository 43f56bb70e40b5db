package dev.rdmarun.runtime;

/** A peer's memory region as RDMA WRITE/READ/atomics address it: received, never typed by hand. */
public record RemoteRegion(long address, long length, int rkey) {
    /** Throws when [offset, offset+length) is outside the region: a bug here would be REM_ACCESS_ERR there. */
    public long addressAt(long offset, long len) {
        if (offset < 0 || len < 0 || offset + len > length) {
            throw new IndexOutOfBoundsException("range [" + offset + ", " + (offset + len)
                    + ") is outside the peer's " + length + "-byte region");
        }
        return address + offset;
    }
}
