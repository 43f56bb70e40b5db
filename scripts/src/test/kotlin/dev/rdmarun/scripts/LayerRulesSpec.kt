package dev.rdmarun.scripts

import com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage
import com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAnyPackage
import com.tngtech.archunit.base.DescribedPredicate.not
import com.tngtech.archunit.core.importer.ClassFileImporter
import com.tngtech.archunit.core.importer.ImportOption
import com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses
import dev.rdmarun.runtime.VerbsProvider
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.collections.shouldContainExactlyInAnyOrder
import java.lang.module.ModuleFinder
import java.nio.file.Path

/**
 * The DSL and the launcher reach the runtime only through the packages its module-info exports.
 * They run on the class path (Kotlin scripting, the launcher's AOT cache), where JPMS holds
 * nothing, so this rule is what holds it; the exports are read from the module, declared once.
 */
class LayerRulesSpec : FunSpec({
    val runtime = ModuleFinder.of(Path.of(VerbsProvider::class.java.protectionDomain.codeSource.location.toURI()))
        .findAll().single().descriptor()
    val exported = runtime.exports().filter { !it.isQualified }.map { it.source() }

    test("the runtime module exports the verbs API and the engine, no provider and no binding") {
        exported shouldContainExactlyInAnyOrder listOf("dev.rdmarun.runtime", "dev.rdmarun.runtime.engine")
    }

    test("the DSL and the launcher use only the runtime's exported packages") {
        val classes = ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.rdmarun.dsl", "dev.rdmarun.scripts")
        noClasses().that().resideInAnyPackage("dev.rdmarun.dsl..", "dev.rdmarun.scripts..")
            .should().dependOnClassesThat(resideInAPackage("dev.rdmarun.runtime..").and(not(resideInAnyPackage(*exported.toTypedArray()))))
            .because("${runtime.name()}'s module-info exports only ${exported.sorted().joinToString()}")
            .check(classes)
    }
})
