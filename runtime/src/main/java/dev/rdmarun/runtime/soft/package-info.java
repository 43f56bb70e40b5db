/**
 * soft0, rdma-run's software verbs provider: RC queue pairs moved in this JVM or over TCP.
 *
 * <p>Security contract (other users of the host are not trusted):
 * <ul>
 *   <li><b>soft0 binds only where it is used.</b> The {@link dev.rdmarun.runtime.SoftTransport} a
 *       context opens with ({@code Device.open(SoftTransport)}; {@code Device.open()} reads the
 *       system property {@value dev.rdmarun.runtime.SoftTransport#PROPERTY}) is {@code AUTO}
 *       (default), {@code MEMORY} or {@code TCP}. {@code MEMORY} never opens a
 *       socket: LIDs are in-JVM (1..1023) and only QPs of this JVM are reachable ({@code rdma-run
 *       --loopback} chooses it). {@code auto} reaches contexts of this JVM in memory and others over
 *       TCP; a context listens only when a QP's {@code localEndpoint} asks for a LID, bound only
 *       to that GID's IP address, on an ephemeral port, which is the LID the endpoint reports.
 *       {@code tcp} is {@code auto} with even same-JVM traffic over TCP (tests).
 *       {@code queryPort(1).lid()} is the context's in-JVM LID; peers in other processes need the
 *       LID of {@code QueuePair.localEndpoint}.</li>
 *   <li><b>Every TCP connection is authenticated before a packet of it is accepted</b>: a mutual
 *       HMAC-SHA256 challenge-response keyed by the {@link dev.rdmarun.runtime.FabricKey} the QPs
 *       share (see {@code TcpHandshake} for the bytes). A QP whose peer is reached over TCP needs a
 *       key at RTR ({@code RtrAttributes.withFabricKey}; EINVAL without). A QP accepts packets only
 *       from its peer's link: in memory, nothing from TCP; over TCP, only connections that proved
 *       its key; and only with its peer's QPN and LID.</li>
 *   <li><b>Nothing is buffered for no one</b>: a frame for an unknown QP, or a QP not behind the
 *       connection's key, is skipped unread; a frame longer than max_msg_sz plus the header closes
 *       the connection; queues are bounded; a connection that has not authenticated within 2 s is
 *       closed, at most 16 may be authenticating per context; an authenticated one idle for 30 s
 *       whose key no QP of the context uses any more is closed.</li>
 *   <li>QP numbers, memory keys are random (hard to guess) yet unique; a stale key never matches.</li>
 *   <li>A message longer than max_msg_sz (16 MiB) fails at post with EINVAL.</li>
 * </ul>
 */
package dev.rdmarun.runtime.soft;
