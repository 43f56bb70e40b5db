package dev.rdmarun.runtime.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * One class, one job, held by the build: a main source file over {@value #MAX_LINES} lines has
 * grown a second job, so it fails here with its name, before review has to catch it. The DSL has
 * the same rule in its own tests.
 */
class SourceSizeTest {
    static final int MAX_LINES = 400;

    @Test
    void noMainSourceFileIsOverTheLimit() throws IOException {
        // Surefire runs in the module's directory.
        Path main = Path.of("src", "main", "java");
        List<String> over;
        try (Stream<Path> files = Files.walk(main)) {
            over = files.filter(f -> f.toString().endsWith(".java"))
                    .map(f -> Map.entry(f, lines(f)))
                    .filter(e -> e.getValue() > MAX_LINES)
                    .map(e -> e.getKey() + " has " + e.getValue() + " lines")
                    .sorted()
                    .toList();
        }
        assertEquals(List.of(), over, "split these files by job (over " + MAX_LINES + " lines)");
    }

    private static long lines(Path file) {
        try (Stream<String> l = Files.lines(file)) {
            return l.count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
