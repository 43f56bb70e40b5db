package dev.rdmarun.runtime.engine;

import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.PortAttributes;
import dev.rdmarun.runtime.QueuePair;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WcStatus;
import dev.rdmarun.runtime.WorkCompletions;

/**
 * The sentence for an error completion: the status, and what the device or provider knows of why
 * (a port gone down, a peer that could not be reached). Apart from the engine because it runs once,
 * off the data path, and asks the device questions the data path never does.
 */
final class CompletionFailure {
    /** When the provider said why the QP could not reach its peer: the GID is not the question then. */
    private static final String CONNECTION_HINT = "the peer's soft0 listener must answer this side within the"
            + " scenario's --timeout: check that the peer still runs and that its address is reachable from here (a"
            + " flood of connections to a soft0 port is named above when one was seen)";

    private static final String PORT_DOWN_HINT =
            "the link under the device went down: bring it up (ip link set DEV up; rdma link show) and run again";

    private CompletionFailure() {
    }

    /** Why [what] (a work request's label) on QP [index] failed, completion [i] of [completions]. */
    static VerbsException of(QueuePair qp, int index, WorkCompletions completions, int i, String what) {
        WcStatus status = completions.status(i);
        VerbsException v = completions.failure(i);
        String down = portDown(qp);
        String trouble = status == WcStatus.RETRY_EXC_ERR ? qp.connectionTrouble() : null;
        String hint = down != null ? PORT_DOWN_HINT : trouble != null ? CONNECTION_HINT : v.hint();
        return new VerbsException(what + " on QP " + index + " (qpn " + QueuePair.qpnText(qp.qpNum()) + ") failed with " + status.name()
                + ": " + status.text() + (down == null ? "" : "; " + down) + (trouble == null ? "" : "; " + trouble), hint);
    }

    /**
     * "port 1 of rxe0 is DOWN" when the QP's port is not active, else null: a device fails work
     * requests when its link goes down, and the status alone (rxe says LOC_QP_OP_ERR) does not tell.
     * The port's state may change only after the failure (rxe updates it asynchronously), so this
     * adds what was seen; the status's hint covers the rest.
     */
    private static String portDown(QueuePair qp) {
        try {
            Context context = qp.protectionDomain().context();
            PortAttributes p = context.queryPort(qp.port());
            if (p.state() == PortAttributes.PortState.ACTIVE) return null;
            return "port " + qp.port() + " of " + context.deviceName() + " is " + p.state();
        } catch (RuntimeException e) {
            return null; // the device is gone too: the status says what there is to say
        }
    }
}
