package dev.rdmarun.runtime.layers;

import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideOutsideOfPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The runtime's layers, as the build holds them on the class path, where module-info does not
 * (scripts and the launcher load the runtime there). From the bottom:
 * {@code os} (libc: eventfd, poll, errno) and {@code ibverbs.ffi} (libibverbs's structs and
 * downcalls) are the only FFM bindings; the verbs API and the engine sit on {@code os}; the
 * providers ({@code ibverbs}, {@code soft}) implement the API, and only {@code ibverbs} binds
 * libibverbs. See docs/architecture.md.
 */
class LayerRulesTest {
    private static final String API = "dev.rdmarun.runtime";
    private static final String ENGINE = "dev.rdmarun.runtime.engine..";
    private static final String OS = "dev.rdmarun.runtime.os..";
    private static final String IBVERBS = "dev.rdmarun.runtime.ibverbs";
    private static final String IBVERBS_FFI = "dev.rdmarun.runtime.ibverbs.ffi..";
    private static final String SOFT = "dev.rdmarun.runtime.soft..";

    private static JavaClasses runtime;

    @BeforeAll
    static void importRuntime() {
        runtime = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                .importPackages("dev.rdmarun.runtime");
    }

    @Test
    void onlyTheBindingsLinkNativeCode() {
        noClasses().that().resideOutsideOfPackages(OS, IBVERBS_FFI)
                .should().dependOnClassesThat().haveFullyQualifiedName("java.lang.foreign.Linker")
                .orShould().dependOnClassesThat().haveFullyQualifiedName("java.lang.foreign.SymbolLookup")
                .because("raw FFM lives in the bindings: os for libc, ibverbs.ffi for libibverbs")
                .check(runtime);
    }

    @Test
    void onlyTheNativeProviderUsesTheLibibverbsBindings() {
        classes().that().resideInAPackage(IBVERBS_FFI)
                .should().onlyHaveDependentClassesThat().resideInAnyPackage(IBVERBS, IBVERBS_FFI)
                .because("the API, the engine and soft0 must not depend on libibverbs's ABI")
                .check(runtime);
    }

    @Test
    void theApiAndTheEngineKnowNoProvider() {
        noClasses().that().resideInAnyPackage(API, ENGINE)
                .should().dependOnClassesThat().resideInAnyPackage(IBVERBS + "..", SOFT)
                .because("providers are found through VerbsProvider, so a new one changes nothing above it")
                .check(runtime);
    }

    @Test
    void theProvidersAreIndependent() {
        noClasses().that().resideInAPackage(SOFT).should().dependOnClassesThat().resideInAPackage(IBVERBS + "..")
                .check(runtime);
        noClasses().that().resideInAPackage(IBVERBS + "..").should().dependOnClassesThat().resideInAPackage(SOFT)
                .check(runtime);
    }

    @Test
    void theOsPlumbingDependsOnNothingOfRdmaRun() {
        noClasses().that().resideInAPackage(OS)
                .should().dependOnClassesThat(resideInAPackage("dev.rdmarun..").and(resideOutsideOfPackage(OS)))
                .because("libc plumbing is shared by the dispatcher and both providers: it sits below them all")
                .check(runtime);
    }

    @Test
    void theEngineSitsOnTheApiOnly() {
        noClasses().that().resideInAPackage(ENGINE)
                .should().dependOnClassesThat().resideInAnyPackage(OS, IBVERBS_FFI)
                .because("the engine drives QPs through the verbs API, whatever the provider")
                .check(runtime);
    }
}
