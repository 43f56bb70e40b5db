package dev.rdmarun.scripts

import io.kotest.assertions.fail
import io.kotest.core.test.Enabled
import java.io.File
import java.net.URI
import java.net.http.HttpClient
import java.net.http.WebSocket
import java.nio.file.Files
import java.util.Base64
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionStage
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException
import java.util.concurrent.atomic.AtomicLong
import kotlin.math.ceil
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonObjectBuilder
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.double
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.put
import kotlinx.serialization.json.putJsonObject

/**
 * Debian's `chromium`, headless, driven over the DevTools protocol: a test loads a page, asks the
 * DOM it built (with the boxes it laid out) and takes a screenshot of the whole page once the load
 * event fired, so nothing waits on a clock. One browser per instance, with a fresh profile
 * directory; every wait ends at [DEADLINE_S] seconds from the start, and [close] kills what is left.
 */
class HeadlessChromium private constructor() : AutoCloseable {
    private val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(DEADLINE_S)
    private val profile = Files.createTempDirectory("chromium-profile").toFile()
    private val process: Process
    private val stderr = ArrayDeque<String>()
    private val listening = CompletableFuture<String>()
    private val pending = ConcurrentHashMap<Long, CompletableFuture<JsonObject>>()
    private val awaited = ConcurrentHashMap<String, CompletableFuture<JsonObject>>()
    private val ids = AtomicLong()
    private val http = HttpClient.newHttpClient()
    private lateinit var socket: WebSocket
    private lateinit var session: String

    init {
        // Software rendering at one device pixel per CSS pixel, so that the screenshot's pixels are the layout's; nothing
        // from the network. Port 0: Chromium picks a free one and prints its address on stderr.
        process = ProcessBuilder(
            BINARY.path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
            "--force-device-scale-factor=1", "--window-size=1000,800", "--user-data-dir=$profile", "--remote-debugging-port=0",
            "about:blank",
        ).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
        Thread.ofPlatform().daemon().start {
            process.errorStream.bufferedReader().forEachLine { line ->
                synchronized(stderr) {
                    stderr += line
                    if (stderr.size > 20) stderr.removeFirst()
                }
                LISTENING.find(line)?.let { listening.complete(it.groupValues[1]) }
            }
            listening.completeExceptionally(IllegalStateException("chromium exited before it listened for DevTools"))
        }
        try {
            socket = await(http.newWebSocketBuilder().buildAsync(URI(await(listening, "start")), Listener()), "connect")
            val target = command("Target.createTarget", null) { put("url", "about:blank") }.string("targetId")
            session = command("Target.attachToTarget", null) { put("targetId", target); put("flatten", true) }.string("sessionId")
            command("Page.enable")
        } catch (e: Throwable) {
            close()
            throw e
        }
    }

    /** Opens [page] and returns once its load event fired. */
    fun load(page: File) {
        val loaded = CompletableFuture<JsonObject>().also { awaited["Page.loadEventFired"] = it } // before navigating: the event may come first
        val url = page.toPath().toUri().toString()
        command("Page.navigate") { put("url", url) }["errorText"]?.let { fail("chromium could not open $url: ${it.jsonPrimitive.content}") }
        await(loaded, "load $url")
    }

    /** The value of a JavaScript [expression] in the page (JSON-serialisable), or a failure with the exception it threw. */
    fun evaluate(expression: String): JsonElement {
        val result = command("Runtime.evaluate") { put("expression", expression); put("returnByValue", true) }
        result["exceptionDetails"]?.let { fail("the page's script failed: $it") }
        return result.getValue("result").jsonObject["value"] ?: fail("the expression has no JSON value: $result")
    }

    /** A PNG of the whole page as laid out (beyond the window), one pixel per CSS pixel. */
    fun screenshot(): ByteArray {
        val size = command("Page.getLayoutMetrics").getValue("cssContentSize").jsonObject
        return screenshot(0, 0, ceil(size.getValue("width").jsonPrimitive.double).toInt(), ceil(size.getValue("height").jsonPrimitive.double).toInt())
    }

    /** A PNG of a part of the page, in page coordinates (CSS pixels): Chromium forces a redraw for each capture, so what
     * [evaluate] changed before is in it. */
    fun screenshot(x: Int, y: Int, width: Int, height: Int): ByteArray {
        val png = command("Page.captureScreenshot") {
            put("format", "png")
            put("captureBeyondViewport", true)
            putJsonObject("clip") {
                put("x", x); put("y", y); put("width", width); put("height", height); put("scale", 1)
            }
        }.string("data")
        return Base64.getDecoder().decode(png)
    }

    override fun close() {
        if (::socket.isInitialized) socket.abort()
        http.shutdownNow()
        val children = process.descendants().toList()
        process.destroy()
        if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly()
        children.forEach { it.destroyForcibly() } // a renderer or zygote that outlived the browser
        profile.deleteRecursively()
    }

    /** Sends [method] to the page's session (or to the browser when [to] is null) and returns its result. */
    private fun command(method: String, to: String? = session, params: JsonObjectBuilder.() -> Unit = {}): JsonObject {
        val id = ids.incrementAndGet()
        val reply = CompletableFuture<JsonObject>().also { pending[id] = it }
        val message = buildJsonObject {
            put("id", id)
            put("method", method)
            putJsonObject("params", params)
            to?.let { put("sessionId", it) }
        }
        await(socket.sendText(message.toString(), true), "take $method")
        val answer = await(reply, "answer $method")
        answer["error"]?.let { fail("chromium refused $method: $it") }
        return answer.getValue("result").jsonObject
    }

    private fun <T> await(future: CompletableFuture<T>, what: String): T = try {
        future.get(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)
    } catch (_: TimeoutException) {
        close()
        fail("chromium did not $what within $DEADLINE_S s, and was killed; its last lines: ${lastLines()}")
    } catch (e: ExecutionException) {
        fail("chromium did not $what: ${e.cause?.message}; its last lines: ${lastLines()}")
    }

    private fun lastLines() = synchronized(stderr) { stderr.joinToString("\n") }

    private fun JsonObject.string(name: String) = getValue(name).jsonPrimitive.content

    /** Answers complete their command's future; an awaited event completes its own; a message may come in parts. */
    private inner class Listener : WebSocket.Listener {
        private val text = StringBuilder()

        override fun onText(webSocket: WebSocket, data: CharSequence, last: Boolean): CompletionStage<*>? {
            text.append(data)
            if (last) {
                val message = Json.parseToJsonElement(text.toString()).jsonObject
                text.setLength(0)
                message["id"]?.let { pending.remove(it.jsonPrimitive.content.toLong())?.complete(message) }
                message["method"]?.let { awaited.remove(it.jsonPrimitive.content)?.complete(message) }
            }
            webSocket.request(1)
            return null
        }

        override fun onClose(webSocket: WebSocket, statusCode: Int, reason: String): CompletionStage<*>? {
            failAll(IllegalStateException("chromium closed the DevTools connection ($statusCode $reason)"))
            return null
        }

        override fun onError(webSocket: WebSocket, error: Throwable) = failAll(error)

        private fun failAll(error: Throwable) {
            (pending.values + awaited.values).forEach { it.completeExceptionally(error) }
        }
    }

    companion object {
        val BINARY = File("/usr/bin/chromium")
        private val LISTENING = Regex("DevTools listening on (ws://\\S+)")

        /** A safety net against a browser that hangs, not a measurement. */
        const val DEADLINE_S = 60L

        val MISSING = "chromium is not installed ($BINARY): bin/setup --ci installs Debian's package, as .ci/run does"

        private val inCi = System.getenv("CI").let { !it.isNullOrBlank() && !it.equals("false", ignoreCase = true) }

        /** For `enabledOrReasonIf`: skipped with [MISSING] as the reason, except under CI, where the case runs and fails with it. */
        fun enabledOrMissing(): Enabled = if (BINARY.canExecute() || inCi) Enabled.enabled else Enabled.disabled(MISSING)

        fun start(): HeadlessChromium {
            if (!BINARY.canExecute()) fail(MISSING)
            return HeadlessChromium()
        }
    }
}
