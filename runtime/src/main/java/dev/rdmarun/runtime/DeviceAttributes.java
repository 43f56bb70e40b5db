package dev.rdmarun.runtime;

/** The ibv_device_attr fields rdma-run uses to validate scenarios and size queues. */
public record DeviceAttributes(
        String firmwareVersion,
        long nodeGuid,
        long maxMrSize,
        int vendorId,
        int vendorPartId,
        int maxQp,
        int maxQpWr,
        int maxSge,
        int maxCq,
        int maxCqe,
        int maxMr,
        int maxPd,
        int maxQpRdAtom,
        int maxQpInitRdAtom,
        AtomicCapability atomicCap,
        int physPortCount) {

    /** enum ibv_atomic_cap. */
    public enum AtomicCapability {
        NONE, HCA, GLOB;

        public static AtomicCapability of(int code) {
            return switch (code) {
                case 1 -> HCA;
                case 2 -> GLOB;
                default -> NONE;
            };
        }
    }
}
