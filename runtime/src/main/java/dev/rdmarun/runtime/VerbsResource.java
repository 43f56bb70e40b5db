package dev.rdmarun.runtime;

import java.util.ArrayList;
import java.util.List;

/**
 * Base of every verbs object: close is idempotent, closes the objects that depend on this one
 * first (newest first: a QP before its CQ, an MR before its PD), and a closed object refuses use
 * with an exception instead of handing a dangling pointer to the provider.
 */
public abstract sealed class VerbsResource implements AutoCloseable
        permits Context, ProtectionDomain, MemoryRegion, CompletionChannel, CompletionQueue, QueuePair {

    private final List<VerbsResource> dependents = new ArrayList<>();
    private final List<VerbsResource> dependsOn = new ArrayList<>();
    private final String kind;
    private volatile boolean closed;

    protected VerbsResource(String kind, VerbsResource... parents) {
        this.kind = kind;
        for (VerbsResource parent : parents) {
            if (parent == null) continue;
            parent.ensureOpen();
            synchronized (parent) {
                parent.dependents.add(this);
            }
            dependsOn.add(parent);
        }
    }

    public final boolean isClosed() {
        return closed;
    }

    /** Throws IllegalStateException when closed. Cheap enough for the data path: one volatile read. */
    protected final void ensureOpen() {
        if (closed) throw new IllegalStateException(kind + " is closed");
    }

    @Override
    public final void close() {
        List<VerbsResource> children;
        synchronized (this) {
            if (closed) return;
            closed = true;
            children = new ArrayList<>(dependents);
            dependents.clear();
        }
        RuntimeException failure = null;
        for (int i = children.size() - 1; i >= 0; i--) {
            try {
                children.get(i).close();
            } catch (RuntimeException e) {
                failure = accumulate(failure, e);
            }
        }
        try {
            destroy();
        } catch (RuntimeException e) {
            failure = accumulate(failure, e);
        }
        for (VerbsResource parent : dependsOn) {
            synchronized (parent) {
                parent.dependents.remove(this);
            }
        }
        if (failure != null) throw failure;
    }

    private static RuntimeException accumulate(RuntimeException first, RuntimeException next) {
        if (first == null) return next;
        first.addSuppressed(next);
        return first;
    }

    /** Releases the native object. Called once, after every dependent is closed. */
    protected abstract void destroy();
}
