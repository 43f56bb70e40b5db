package dev.rdmarun.dsl

import java.util.concurrent.TimeoutException

/**
 * A wait of the scenario outlived its deadline, the scenario's `timeout` (`--timeout`, default
 * 30 s): its [message] is the one sentence that says what this side waited for and what the peer
 * last did, e.g. `the server waited 30s for a message in receive() on QP 0; the client made no
 * progress either: it waits for the server to reach barrier 1`.
 *
 * Thrown by every deadline of a scenario: a QP's waits (`receive()`, `awaitCompletion()`,
 * `awaitCompletions(n)`, `awaitAll()`, an operation waiting for a credit, for room in the send
 * queue or for the buffer rule), `barrier()`, the end of the scenario, a warm-up round's agreement
 * with the peer, `connect(peer)` (a server waiting for its client, a client retrying the server,
 * the handshake) and a control connection that goes silent. The wait throws it, and so do
 * `rdma { }`, [rdmaScope] and [RdmaJava.run]: it ends the scenario (every later operation fails
 * with it too), so catch it around them, e.g. to try again with a longer timeout:
 *
 * ```
 * val result = try {
 *     rdma { timeout(5.seconds); connect(peer); ... }
 * } catch (e: TimeoutException) {   // java.util.concurrent; or catch RdmaTimeoutException
 *     println(e.message)           // the sentence
 *     null
 * }
 * ```
 *
 * **Why a [TimeoutException].** It is the JVM's type for "this blocking call ran out of time"
 * (`Future.get`, `CompletableFuture.orTimeout`, whose TimeoutException kotlinx's
 * `CompletableFuture.await()` rethrows as it is), so `catch (e: TimeoutException)` catches it.
 * It is deliberately **not** a `CancellationException`, as kotlinx's `TimeoutCancellationException`
 * is: that one is `withTimeout`'s own deadline cancelling its block, and coroutines treat any
 * CancellationException as a normal cancellation (a `launch` does not report it, a parent scope
 * does not fail with it), so a scenario's failure thrown as one could be swallowed. Nor is it a
 * [ScenarioException] (a class has one superclass): [describeFailure] gives its sentence all the
 * same, and launchers print it as before.
 *
 * **A deadline of your own around one wait** is kotlinx's: `withTimeout(100.milliseconds) {
 * receive() }` throws `TimeoutCancellationException` when it passes, and `withTimeoutOrNull`
 * returns null. That ends only the wait it wraps, not the scenario: a receive() cancelled so took
 * no message (the next receive() gets it), a work request whose awaitCompletion() was cancelled
 * stays outstanding (the next awaitCompletion() returns it), an operation cancelled while it
 * waited for a credit, for room or for a buffer was not posted.
 *
 * Java: it is a checked exception; [RdmaJava.run] declares it.
 */
public class RdmaTimeoutException(message: String, cause: Throwable? = null) : TimeoutException(message) {
    init {
        if (cause != null) initCause(cause)
    }
}
