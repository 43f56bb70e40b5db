package dev.rdmarun.runtime;

import dev.rdmarun.runtime.os.LibC;

/**
 * A verbs call failed. The message names the call and the errno text; {@link #hint()} says the
 * likely cause and fix where it is known (wrong GID index, no receive posted, no kernel support...).
 */
public class VerbsException extends RuntimeException {
    private final int errno;
    private final String hint;

    public VerbsException(String message, int errno, String hint) {
        super(message);
        this.errno = errno;
        this.hint = hint;
    }

    public VerbsException(String message, String hint) {
        this(message, 0, hint);
    }

    /** "call failed: strerror (errno N)", with errno 0 meaning the call gave no errno. */
    public static VerbsException of(String call, int errno, String hint) {
        String text = errno == 0 ? call + " failed" : call + " failed: " + LibC.strerror(errno) + " (errno " + errno + ")";
        return new VerbsException(text, errno, hint);
    }

    public int errno() {
        return errno;
    }

    /** Likely cause and fix, or null when none is known. */
    public String hint() {
        return hint;
    }

    /** Message and hint on one line. */
    public String describeInline() {
        return hint == null ? getMessage() : getMessage() + " (" + hint + ")";
    }

    /** Message and hint on one or two lines, for people. */
    public String describe() {
        return hint == null ? getMessage() : getMessage() + "\n  hint: " + hint;
    }
}
