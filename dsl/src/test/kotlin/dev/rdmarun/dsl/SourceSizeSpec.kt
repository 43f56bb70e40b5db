package dev.rdmarun.dsl

import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldBeEmpty
import java.io.File

/**
 * One class, one job, held by the build for the DSL as for the runtime: a main source file that
 * passes [MAX_LINES] lines has taken on a second job, and this names it before a review must.
 */
class SourceSizeSpec : FunSpec({
    test("no Kotlin file under src/main/kotlin is over $MAX_LINES lines") {
        // Surefire runs in the module's directory.
        val root = File("src/main/kotlin")
        check(root.isDirectory) { "no ${root.absolutePath}: run from the dsl module" }
        val tooLong = root.walkTopDown()
            .filter { it.isFile && it.extension == "kt" }
            .map { it to it.useLines { lines -> lines.count() } }
            .filter { (_, count) -> count > MAX_LINES }
            .map { (file, count) -> "${file.relativeTo(root)}: $count lines (split it by job)" }
            .sorted()
            .toList()
        tooLong.shouldBeEmpty()
    }
}) {
    companion object {
        const val MAX_LINES = 400
    }
}
