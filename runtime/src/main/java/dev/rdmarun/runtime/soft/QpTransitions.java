package dev.rdmarun.runtime.soft;

import static dev.rdmarun.runtime.QpAttr.*;

import dev.rdmarun.runtime.QpAttr;
import dev.rdmarun.runtime.QpState;
import java.util.EnumSet;
import java.util.Set;

/**
 * The RC rows of the IB spec's QP state transition table, as the kernel checks them
 * (ib_modify_qp_is_ok): for each allowed (from, to) the attributes a modify must carry and the
 * ones it may carry. Anything else is EINVAL.
 */
final class QpTransitions {
    private QpTransitions() {}

    record Rule(Set<QpAttr> required, Set<QpAttr> optional) {
        boolean allows(Set<QpAttr> mask) {
            if (!mask.containsAll(required)) return false;
            for (QpAttr a : mask) {
                if (a != STATE && !required.contains(a) && !optional.contains(a)) return false;
            }
            return true;
        }
    }

    private static final Rule NONE = new Rule(Set.of(), Set.of());

    /** The rule for an RC QP going from → to, or null when the spec has no such transition. */
    static Rule rc(QpState from, QpState to) {
        if (to == QpState.RESET) return NONE; // any state may go back to RESET
        if (to == QpState.ERR) return from == QpState.RESET ? null : NONE; // but a RESET QP has nothing to fail
        return switch (from) {
            case RESET -> to == QpState.INIT ? new Rule(EnumSet.of(PKEY_INDEX, PORT, ACCESS_FLAGS), Set.of()) : null;
            case INIT -> switch (to) {
                case INIT -> new Rule(Set.of(), EnumSet.of(PKEY_INDEX, PORT, ACCESS_FLAGS));
                case RTR -> new Rule(EnumSet.of(AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER),
                        EnumSet.of(ACCESS_FLAGS, PKEY_INDEX));
                default -> null;
            };
            case RTR -> to == QpState.RTS
                    ? new Rule(EnumSet.of(SQ_PSN, TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC),
                            EnumSet.of(CUR_STATE, ACCESS_FLAGS, MIN_RNR_TIMER))
                    : null;
            case RTS -> to == QpState.RTS ? new Rule(Set.of(), EnumSet.of(CUR_STATE, ACCESS_FLAGS, MIN_RNR_TIMER)) : null;
            default -> null;
        };
    }
}
