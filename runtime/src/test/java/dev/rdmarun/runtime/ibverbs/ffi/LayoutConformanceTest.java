package dev.rdmarun.runtime.ibverbs.ffi;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;

import dev.rdmarun.runtime.WcLayout;
import dev.rdmarun.runtime.os.CStruct;
import dev.rdmarun.runtime.os.LibC;
import java.io.IOException;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Compares every Java layout that mirrors a C type with what gcc says about {@code <infiniband/verbs.h>}:
 * sizeof of each type, and offsetof and sizeof of each named member, nested paths included.
 *
 * <p>The checks are generated from the layouts themselves (walked reflectively), so a new field or a new
 * layout is checked without touching this test; a Java name that C lacks breaks the gcc compile instead of
 * being skipped. Names that legitimately differ are listed in {@link #C_ALIASES} and {@link #NOT_IN_C}.
 *
 * <p>Without gcc or libibverbs-dev the comparison is skipped, except when {@code CI} is set: CI installs
 * both, so there a missing toolchain is a broken build, not a reason to skip.
 */
class LayoutConformanceTest {
    /** Classes whose public static MemoryLayout fields mirror C types; all such layouts are checked. */
    private static final List<Class<?>> LAYOUT_HOLDERS = List.of(Structs.class, WcLayout.class, LibC.class);

    /** Top-level layouts whose C type is not {@code struct <layout name>}. */
    private static final Map<String, String> C_TYPES = Map.of("ibv_gid", "union ibv_gid");

    /** Java member paths ("struct.path") that C spells differently; children inherit the C spelling. */
    private static final Map<String, String> C_ALIASES = Map.of(
            // Java flattens the one-member union; in C it is union { struct { remote_srqn } xrc; } qp_type.
            "ibv_send_wr.qp_type.remote_srqn", "qp_type.xrc.remote_srqn",
            // Java's opaque tail stands for C's anonymous union { bind_mw; tso; }. bind_mw is its largest
            // member and starts where the union does, so both offset and size are comparable.
            "ibv_send_wr.bind_mw_or_tso", "bind_mw");

    /** Java members with no C counterpart at all. Their extent is still pinned by the neighbours' offsets. */
    private static final Set<String> NOT_IN_C = Set.of(
            // Stands for the 38 members from advise_mr to _ABI_placeholder3 that the runtime never touches;
            // query_port before it and sz after it are checked, and so is sizeof(struct verbs_context).
            "verbs_context.unused_ops");

    // Surefire sets basedir; IDEs run tests from the module directory, which "" resolves to.
    private static final Path MODULE = Path.of(System.getProperty("basedir", "")).toAbsolutePath();
    private static final Path C_SOURCE = MODULE.resolve("src/test/c/layouts.c");
    private static final Path WORK = MODULE.resolve("target/layout-conformance");

    /** The Java side of one comparison: a whole type ({@code path} empty: size, align) or a member (offset, size). */
    private record Check(String struct, String path, String cType, String cMember, long offset, long size,
            long align) {
        boolean whole() { return path.isEmpty(); }
        String key() { return whole() ? struct : struct + "." + path; }
    }

    /**
     * One test runs the C side, then one test per layout compares. The C side runs inside a test, not in the
     * factory, because surefire does not report an aborted factory as skipped; this way a missing toolchain
     * shows as skipped tests, and a broken compile fails once instead of once per layout.
     */
    @TestFactory
    Stream<DynamicTest> javaLayoutsMatchVerbsH() {
        Map<String, List<Check>> checks = new LinkedHashMap<>();
        for (MemoryLayout layout : javaLayouts()) {
            checks.put(layout.name().orElseThrow(), checksOf(layout));
        }
        AtomicReference<Map<String, Long>> c = new AtomicReference<>();
        DynamicTest runC = dynamicTest("gcc compiles and runs src/test/c/layouts.c",
                () -> c.set(runC(checks.values().stream().flatMap(List::stream).toList())));
        Stream<DynamicTest> compares = checks.values().stream().map(k -> dynamicTest(k.getFirst().cType(), () -> {
            assumeTrue(c.get() != null, "the C program did not run; see the first test of this factory");
            compare(k, c.get());
        }));
        return Stream.concat(Stream.of(runC), compares);
    }

    /** Stale alias or exclusion entries would hide nothing yet read as if they did; keep them honest. */
    @Test
    void aliasesAndExclusionsNameExistingJavaMembers() {
        Map<String, MemoryLayout> byName = new HashMap<>();
        javaLayouts().forEach(l -> byName.put(l.name().orElseThrow(), l));
        for (String key : Stream.concat(C_ALIASES.keySet().stream(), NOT_IN_C.stream()).toList()) {
            String[] parts = key.split("\\.");
            MemoryLayout top = byName.get(parts[0]);
            assertTrue(top != null, key + ": no Java layout named " + parts[0]);
            assertDoesNotThrow(() -> CStruct.offset(top, Arrays.copyOfRange(parts, 1, parts.length)),
                    key + ": no such Java member");
        }
    }

    private static List<MemoryLayout> javaLayouts() {
        List<MemoryLayout> layouts = new ArrayList<>();
        for (Class<?> holder : LAYOUT_HOLDERS) {
            for (Field f : holder.getFields()) {
                if (Modifier.isStatic(f.getModifiers()) && MemoryLayout.class.isAssignableFrom(f.getType())) {
                    try {
                        layouts.add((MemoryLayout) f.get(null));
                    } catch (IllegalAccessException e) {
                        throw new AssertionError(e);
                    }
                }
            }
        }
        assertTrue(!layouts.isEmpty(), "found no layouts in " + LAYOUT_HOLDERS);
        return layouts;
    }

    private static List<Check> checksOf(MemoryLayout top) {
        String struct = top.name().orElseThrow(() -> new AssertionError("unnamed top-level layout " + top));
        String cType = C_TYPES.getOrDefault(struct, "struct " + struct);
        List<Check> out = new ArrayList<>();
        out.add(new Check(struct, "", cType, null, 0, top.byteSize(), top.byteAlignment()));
        if (top instanceof GroupLayout group) {
            walk(top, group, List.of(), "", cType, out);
        }
        return out;
    }

    /** Adds a check for every named member of {@code group}, recursing into nested structs and unions. */
    private static void walk(MemoryLayout top, GroupLayout group, List<String> prefix, String cPrefix, String cType,
            List<Check> out) {
        String struct = top.name().orElseThrow();
        for (MemoryLayout member : group.memberLayouts()) {
            if (member instanceof PaddingLayout) {
                continue;
            }
            List<String> path = new ArrayList<>(prefix);
            path.add(member.name().orElseThrow(() -> new AssertionError(
                    cType + ": unnamed member after " + prefix + "; name it or make it padding")));
            String javaPath = String.join(".", path);
            String key = struct + "." + javaPath;
            if (NOT_IN_C.contains(key)) {
                continue;
            }
            String cMember = C_ALIASES.getOrDefault(key, cPrefix + path.getLast());
            out.add(new Check(struct, javaPath, cType, cMember,
                    CStruct.offset(top, path.toArray(String[]::new)), member.byteSize(), 0));
            if (member instanceof GroupLayout inner) {
                walk(top, inner, path, cMember + ".", cType, out);
            }
        }
    }

    /** Generates the check list, compiles it with layouts.c and returns the program's "kind key" -> bytes. */
    private static Map<String, Long> runC(List<Check> checks) throws IOException, InterruptedException {
        assertTrue(Files.isRegularFile(C_SOURCE), "missing " + C_SOURCE);
        Files.createDirectories(WORK);
        StringBuilder h = new StringBuilder("/* Generated by LayoutConformanceTest from the Java layouts. */\n");
        for (Check k : checks) {
            h.append(k.whole()
                    ? "TYPE(\"%s\", %s)\n".formatted(k.key(), k.cType())
                    : "FIELD(\"%s\", %s, %s)\n".formatted(k.key(), k.cType(), k.cMember()));
        }
        Files.writeString(WORK.resolve("layout_checks.h"), h);

        // Preprocessing alone tells "toolchain or headers missing" (skip) apart from a bad check (failure).
        String gcc = "gcc";
        List<String> flags = List.of("-std=gnu11", "-I" + WORK, "-I/usr/include");
        Result probe;
        try {
            probe = run(concat(List.of(gcc, "-E", "-o", "/dev/null"), flags, List.of(C_SOURCE.toString())));
        } catch (IOException e) {
            probe = new Result(-1, e.getMessage());
        }
        requireToolchain(probe.exit == 0, "gcc cannot preprocess layouts.c against <infiniband/verbs.h>:\n"
                + probe.output);

        Path exe = WORK.resolve("layouts");
        Result compile = run(concat(List.of(gcc, "-o", exe.toString()), flags, List.of(C_SOURCE.toString())));
        if (compile.exit != 0) {
            fail("gcc rejected the generated checks in " + WORK.resolve("layout_checks.h") + ". Most likely a Java"
                    + " layout names a member verbs.h does not have: rename it to the C name, or list it in"
                    + " C_ALIASES / NOT_IN_C with a reason.\n" + compile.output);
        }
        Result program = run(List.of(exe.toString()));
        assertEquals(0, program.exit, "layouts program failed:\n" + program.output);

        Map<String, Long> facts = new HashMap<>();
        for (String line : program.output.split("\n")) {
            String[] f = line.split(" ");
            assertEquals(3, f.length, "unexpected output line from layouts program: " + line);
            facts.put(f[0] + " " + f[1], Long.parseLong(f[2]));
        }
        return facts;
    }

    /** Reports every mismatch in one struct at once, so a shifted field and its followers read as one story. */
    private static void compare(List<Check> checks, Map<String, Long> c) {
        List<String> mismatches = new ArrayList<>();
        for (Check k : checks) {
            String where = k.whole() ? k.cType()
                    : k.cType() + ", field " + k.path()
                            + (k.cMember().equals(k.path()) ? "" : " (C: " + k.cMember() + ")");
            if (k.whole()) {
                expect(mismatches, where, "align", k.align(), c.get("align " + k.key()));
            } else {
                expect(mismatches, where, "offset", k.offset(), c.get("offset " + k.key()));
            }
            expect(mismatches, where, "size", k.size(), c.get("size " + k.key()));
        }
        if (!mismatches.isEmpty()) {
            fail(mismatches.size() + " layout mismatch(es) against <infiniband/verbs.h>:\n  "
                    + String.join("\n  ", mismatches));
        }
    }

    private static void expect(List<String> mismatches, String where, String what, long java, Long c) {
        if (c == null) {
            mismatches.add(where + ": the C program printed no " + what);
        } else if (c != java) {
            mismatches.add("%s: Java %s %d, C %s %d".formatted(where, what, java, what, c));
        }
    }

    private static void requireToolchain(boolean present, String why) {
        String ci = System.getenv("CI");
        boolean inCi = ci != null && !ci.isBlank() && !ci.equalsIgnoreCase("false");
        String advice = "\nInstall gcc and libibverbs-dev to run the layout conformance test.";
        if (inCi) {
            assertTrue(present, why + advice + " CI is set, so this fails instead of being skipped.");
        } else {
            assumeTrue(present, why + advice);
        }
    }

    private record Result(int exit, String output) {}

    private static Result run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        p.getOutputStream().close();
        String output = new String(p.getInputStream().readAllBytes(), UTF_8);
        return new Result(p.waitFor(), output);
    }

    @SafeVarargs
    private static List<String> concat(List<String>... parts) {
        return Stream.of(parts).flatMap(List::stream).toList();
    }
}
