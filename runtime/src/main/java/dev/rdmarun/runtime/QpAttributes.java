package dev.rdmarun.runtime;

import java.util.EnumSet;
import java.util.Set;

/**
 * ibv_qp_attr together with its mask: every setter records the attribute it sets, so the mask of
 * a modify is exactly what was set ({@link QueuePair#modify}). The typed transitions of
 * {@link QueuePair} (modifyToInit, modifyToRtr, ...) build these; experiments with the state
 * machine build their own, e.g. an INIT→RTR that leaves out a required attribute.
 */
public final class QpAttributes {
    private final EnumSet<QpAttr> mask = EnumSet.noneOf(QpAttr.class);
    private QpState state = QpState.RESET;
    private QpState currentState = QpState.RESET;
    private Set<Access> access = Set.of();
    private int pkeyIndex;
    private int port;
    private int qkey;
    private AddressVector av;
    private Mtu pathMtu = Mtu.MTU_1024;
    private int destQpn;
    private int rqPsn;
    private int sqPsn;
    private int maxDestRdAtomic;
    private int minRnrTimer;
    private int timeout;
    private int retryCount;
    private int rnrRetry;
    private int maxRdAtomic;
    private FabricKey fabricKey;
    private java.time.Duration connectTimeout;

    public QpAttributes state(QpState s) {
        state = s;
        mask.add(QpAttr.STATE);
        return this;
    }

    public QpAttributes currentState(QpState s) {
        currentState = s;
        mask.add(QpAttr.CUR_STATE);
        return this;
    }

    /** The remote operations the QP accepts (REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC). */
    public QpAttributes access(Set<Access> a) {
        access = Set.copyOf(a);
        mask.add(QpAttr.ACCESS_FLAGS);
        return this;
    }

    public QpAttributes pkeyIndex(int i) {
        pkeyIndex = i;
        mask.add(QpAttr.PKEY_INDEX);
        return this;
    }

    public QpAttributes port(int p) {
        port = p;
        mask.add(QpAttr.PORT);
        return this;
    }

    public QpAttributes qkey(int q) {
        qkey = q;
        mask.add(QpAttr.QKEY);
        return this;
    }

    public QpAttributes addressVector(AddressVector a) {
        av = a;
        mask.add(QpAttr.AV);
        return this;
    }

    /** soft0's connection secret ({@link FabricKey}); not a verbs attribute, so no mask bit: hardware never sees it. */
    public QpAttributes fabricKey(FabricKey k) {
        fabricKey = k;
        return this;
    }

    /** soft0's connect timeout ({@link RtrAttributes#withConnectTimeout}); no mask bit either: null is soft0's default. */
    public QpAttributes connectTimeout(java.time.Duration d) {
        connectTimeout = d;
        return this;
    }

    public QpAttributes pathMtu(Mtu m) {
        pathMtu = m;
        mask.add(QpAttr.PATH_MTU);
        return this;
    }

    public QpAttributes destQpn(int qpn) {
        destQpn = qpn;
        mask.add(QpAttr.DEST_QPN);
        return this;
    }

    public QpAttributes rqPsn(int psn) {
        rqPsn = psn;
        mask.add(QpAttr.RQ_PSN);
        return this;
    }

    public QpAttributes sqPsn(int psn) {
        sqPsn = psn;
        mask.add(QpAttr.SQ_PSN);
        return this;
    }

    public QpAttributes maxDestRdAtomic(int n) {
        maxDestRdAtomic = n;
        mask.add(QpAttr.MAX_DEST_RD_ATOMIC);
        return this;
    }

    public QpAttributes minRnrTimer(int t) {
        minRnrTimer = t;
        mask.add(QpAttr.MIN_RNR_TIMER);
        return this;
    }

    public QpAttributes timeout(int t) {
        timeout = t;
        mask.add(QpAttr.TIMEOUT);
        return this;
    }

    public QpAttributes retryCount(int n) {
        retryCount = n;
        mask.add(QpAttr.RETRY_CNT);
        return this;
    }

    public QpAttributes rnrRetry(int n) {
        rnrRetry = n;
        mask.add(QpAttr.RNR_RETRY);
        return this;
    }

    public QpAttributes maxRdAtomic(int n) {
        maxRdAtomic = n;
        mask.add(QpAttr.MAX_QP_RD_ATOMIC);
        return this;
    }

    public Set<QpAttr> mask() {
        return EnumSet.copyOf(mask);
    }

    public boolean has(QpAttr a) {
        return mask.contains(a);
    }

    /** The mask as ibv_modify_qp takes it. */
    public int maskBits() {
        int bits = 0;
        for (QpAttr a : mask) bits |= a.bit();
        return bits;
    }

    public QpState state() { return state; }
    public QpState currentState() { return currentState; }
    public FabricKey fabricKey() { return fabricKey; }
    /** soft0's connect timeout, or null for its default. */
    public java.time.Duration connectTimeout() { return connectTimeout; }
    public Set<Access> access() { return access; }
    public int pkeyIndex() { return pkeyIndex; }
    public int port() { return port; }
    public int qkey() { return qkey; }
    public AddressVector addressVector() { return av; }
    public Mtu pathMtu() { return pathMtu; }
    public int destQpn() { return destQpn; }
    public int rqPsn() { return rqPsn; }
    public int sqPsn() { return sqPsn; }
    public int maxDestRdAtomic() { return maxDestRdAtomic; }
    public int minRnrTimer() { return minRnrTimer; }
    public int timeout() { return timeout; }
    public int retryCount() { return retryCount; }
    public int rnrRetry() { return rnrRetry; }
    public int maxRdAtomic() { return maxRdAtomic; }

    /** "INIT→RTR" for messages: from the state given (or RESET) to the one set (or the same). */
    String describe(QpState from) {
        return from + "→" + (has(QpAttr.STATE) ? state : from);
    }
}
