package dev.rdmarun.scripts

/**
 * Closes what was [add]ed in reverse order (a QP before its CQ, an MR before its PD), every one of
 * them even when some fail: the first failure is thrown, the others are attached as suppressed.
 * A flat alternative to nesting one `use` per verbs object.
 */
class Resources : AutoCloseable {
    private val stack = ArrayDeque<AutoCloseable>()

    fun <T : AutoCloseable> add(resource: T): T = resource.also { stack.addLast(it) }

    override fun close() {
        var failure: Throwable? = null
        while (stack.isNotEmpty()) {
            try {
                stack.removeLast().close()
            } catch (t: Throwable) {
                if (failure == null) failure = t else failure.addSuppressed(t)
            }
        }
        if (failure != null) throw failure
    }
}
