package dev.rdmarun.dsl

/**
 * The version of the control protocol, the TCP conversation in which two peers agree on a
 * scenario and exchange their QPs (docs/control-protocol.md). Both sides must speak the same one:
 * a peer of another version is told so in one sentence. `rdma-run --version` and the results
 * JSON's `controlProtocol` report it.
 *
 * 4: proofs of the secret and the plan instead of showing the fingerprint, soft0's fabric key
 * derived on both sides; 5: the done frame says whether its side measured a latency section;
 * 6: a heartbeat's `stalled` also covers a wait for a credit (an older peer would read both sides
 * blocked on credits as a live run, or a credit wait as a wait in receive()).
 */
public const val CONTROL_PROTOCOL_VERSION: Int = 6
