package dev.rdmarun.runtime.soft;

/** A hop to a context in this JVM: straight into its engine's inbound queue. */
record LocalLink(SoftContext target) implements Link {
    @Override
    public boolean offer(Packet p) {
        return target.engine.deliver(p);
    }
}
