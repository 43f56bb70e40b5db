package dev.rdmarun.dsl

import dev.rdmarun.dsl.Fixtures.plan
import dev.rdmarun.runtime.Access
import dev.rdmarun.runtime.Access.LOCAL_WRITE
import dev.rdmarun.runtime.Access.REMOTE_ATOMIC
import dev.rdmarun.runtime.Access.REMOTE_READ
import dev.rdmarun.runtime.Access.REMOTE_WRITE
import io.kotest.core.spec.style.FunSpec
import io.kotest.matchers.shouldBe

/** Memory regions get exactly the access the scenario's operations need, per side. */
class AccessPlanSpec : FunSpec({
    fun access(role: Role, block: suspend ScenarioScope.() -> Unit) = plan { connect(peer); block() }.accessFor(role)

    test("a writer's peer grants REMOTE_WRITE (with the LOCAL_WRITE verbs requires); the writer grants nothing") {
        val server = access(Role.SERVER) { client { write() } }
        server.data shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE)
        server.qpAccess shouldBe setOf(REMOTE_WRITE)
        val client = access(Role.CLIENT) { client { write() } }
        client.data shouldBe emptySet()
        client.qpAccess shouldBe emptySet<Access>()
    }

    test("writeWithImm also needs receive slots at the target and credit words at the writer") {
        val target = access(Role.SERVER) { client { qp(0) { writeWithImm(7) } }; server { qp(0) { receive() } } }
        target.data shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE)
        target.receiveSlots shouldBe true
        target.creditWords shouldBe false
        val writer = access(Role.CLIENT) { client { qp(0) { writeWithImm(7) } }; server { qp(0) { receive() } } }
        writer.receiveSlots shouldBe false
        writer.creditWords shouldBe true
        writer.qpAccess shouldBe setOf(REMOTE_WRITE) // the target writes credit updates back
    }

    test("a reader's peer grants REMOTE_READ only; the reader's own buffer needs LOCAL_WRITE for the data") {
        access(Role.SERVER) { client { read() } }.data shouldBe setOf(REMOTE_READ)
        access(Role.CLIENT) { client { read() } }.data shouldBe setOf(LOCAL_WRITE)
    }

    test("atomics: the peer grants REMOTE_ATOMIC (+LOCAL_WRITE), the result lands in the caller's buffer") {
        access(Role.SERVER) { client { qp(0) { fetchAndAdd(1) } } }.data shouldBe setOf(LOCAL_WRITE, REMOTE_ATOMIC)
        access(Role.CLIENT) { client { qp(0) { compareAndSwap(0, 1) } } }.data shouldBe setOf(LOCAL_WRITE)
    }

    test("a send-only side needs no access flags and no receive slots; the receiver needs LOCAL_WRITE slots only") {
        val sender = access(Role.CLIENT) { client { send() }; server { receive() } }
        sender.data shouldBe emptySet()
        sender.receiveSlots shouldBe false
        sender.creditWords shouldBe true
        sender.holdsMessages shouldBe false
        val receiver = access(Role.SERVER) { client { send() }; server { receive() } }
        receiver.data shouldBe emptySet()
        receiver.receiveSlots shouldBe true
        receiver.holdsMessages shouldBe true
        receiver.qpAccess shouldBe emptySet<Access>()
    }

    test("operations of both sides need the access on both sides") {
        val a = access(Role.SERVER) { write(); read() }
        a.data shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ)
        a shouldBe access(Role.CLIENT) { write(); read() }
    }

    test("explicit remoteAccess replaces the derived flags") {
        access(Role.SERVER) { }.data shouldBe emptySet()
        plan { remoteAccess(RemoteAccess.READ, RemoteAccess.WRITE); connect(peer); client { read() } }
            .accessFor(Role.SERVER).data shouldBe setOf(LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ)
    }
})
