package dev.rdmarun.runtime;

import java.util.ArrayList;
import java.util.List;

/**
 * The {@link PollingDispatcher.Agent}s a dispatcher runs on every round, and the shortest sleep
 * they allow. Apart from the CQ and task duties because their work changes without a completion
 * or a task (a credit word, a deadline), so they also bound how long EVENT mode sleeps.
 */
final class AgentList {
    private final List<PollingDispatcher.Agent> agents = new ArrayList<>();

    void add(PollingDispatcher.Agent agent) {
        if (!agents.contains(agent)) agents.add(agent);
    }

    void remove(PollingDispatcher.Agent agent) {
        agents.remove(agent);
    }

    /** Runs every agent once; returns the work they did. */
    int run() {
        int n = 0;
        for (int i = 0; i < agents.size(); i++) {
            try {
                n += agents.get(i).doWork();
            } catch (RuntimeException e) {
                TaskQueue.reportUncaught(e);
            }
        }
        return n;
    }

    /** The shortest sleep any agent asks for, in ms; -1: none asks. */
    int sleepMillis() {
        long min = -1;
        for (int i = 0; i < agents.size(); i++) {
            long m = agents.get(i).maxSleepMillis();
            if (m >= 0 && (min < 0 || m < min)) min = m;
        }
        return (int) Math.min(min, Integer.MAX_VALUE);
    }
}
