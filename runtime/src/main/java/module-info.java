/**
 * rdma-run's runtime: libibverbs through the FFM API, rdma-run's software provider (soft0), the
 * polling dispatcher and the per-QP engine.
 *
 * <p>Exported: the verbs API ({@code dev.rdmarun.runtime}) and the engine. Not exported: the
 * providers ({@code ibverbs}, {@code soft}, found through {@link dev.rdmarun.runtime.VerbsProvider}),
 * the libibverbs bindings ({@code ibverbs.ffi}) and the OS plumbing ({@code os}). On the class path
 * (scripts, the launcher) the module boundary does not hold; {@code LayerRulesTest} holds it there.
 */
module dev.rdmarun.runtime {
    // The engine's statistics hand out HdrHistogram's Histogram; its jar names no module, so the name is the file's.
    requires transitive HdrHistogram;
    requires org.agrona;
    requires org.jctools.core;

    exports dev.rdmarun.runtime;
    exports dev.rdmarun.runtime.engine;

    uses dev.rdmarun.runtime.VerbsProvider;
    provides dev.rdmarun.runtime.VerbsProvider with
            dev.rdmarun.runtime.ibverbs.NativeProvider,
            dev.rdmarun.runtime.soft.SoftProvider;
}
