package dev.rdmarun.scripts

import com.code_intelligence.jazzer.junit.FuzzTest
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue

/**
 * `rdma-run report`'s reader against whatever a results file may hold: [ResultsReader.readAny]
 * returns a checked document, which [ReportPage] then renders without failing, or throws a
 * [ResultsFormatException] whose message is one line naming the file, and nothing else. The seed
 * corpus in ResultsReaderFuzzTestInputs/ holds documents that real runs on soft0 wrote (`--json`:
 * write-bw, a timed run with `--interval`, two `-a` sweeps cut to their first sizes, a failed run) and
 * perftest `--out_json` files written by hand from perftest's format (perftest-write-bw, perftest-send-lat). In a
 * normal build this runs the seeds only; e2e/fuzz.sh fuzzes it.
 */
class ResultsReaderFuzzTest {
    @FuzzTest(maxDuration = "60s")
    fun document(input: ByteArray) {
        val read = try {
            ResultsReader.readAny("fuzz.json", input)
        } catch (e: ResultsFormatException) {
            val sentence = e.message.orEmpty()
            assertTrue(sentence.startsWith("fuzz.json"), "the sentence does not name the file: $sentence")
            assertFalse(sentence.any { it == '\n' || it == '\r' }, "more than one line: $sentence")
            return
        }
        ReportPage.render(listOf(read))
    }
}
