package dev.rdmarun.bench;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Arrays;
import java.util.Locale;

/**
 * What soft0 is compared with in bench/soft0.sh: the same machine doing the same exchange with
 * nothing of rdma-run in the way.
 *
 * <ul>
 *   <li>{@code pingpong WARMUP N}: two threads hand a counter back and forth through volatile
 *       fields, each spinning on its own; prints the median one-way time (round trip / 2), as
 *       {@code bench/scenarios/lat.main.kts} does for soft0's in-memory transport.</li>
 *   <li>{@code tcp-sink PORT} and {@code tcp-source PORT SIZE WARMUP N}: two processes, one
 *       writing SIZE-byte blocks into a loopback TCP connection and the other reading them; the
 *       source prints the MB/s (10^6 bytes) of the last N blocks, acknowledged by the sink, as
 *       {@code bench/scenarios/bw.main.kts} does for soft0 over TCP.</li>
 * </ul>
 */
public final class Baselines {
    private Baselines() {}

    public static void main(String[] args) throws Exception {
        switch (args.length == 0 ? "" : args[0]) {
            case "pingpong" -> pingpong(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            case "tcp-sink" -> tcpSink(Integer.parseInt(args[1]));
            case "tcp-source" -> tcpSource(Integer.parseInt(args[1]), Integer.parseInt(args[2]),
                    Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            default -> {
                System.err.println("usage: Baselines pingpong WARMUP N | tcp-sink PORT | tcp-source PORT SIZE WARMUP N");
                System.exit(2);
            }
        }
    }

    private static volatile long ping;
    private static volatile long pong;

    private static void pingpong(int warmup, int n) throws InterruptedException {
        int total = warmup + n;
        Thread echo = new Thread(() -> {
            for (long i = 1; i <= total; i++) {
                while (ping != i) Thread.onSpinWait();
                pong = i;
            }
        }, "echo");
        echo.start();
        long[] rtt = new long[n];
        for (int i = 1; i <= total; i++) {
            long t0 = System.nanoTime();
            ping = i;
            while (pong != i) Thread.onSpinWait();
            if (i > warmup) rtt[i - warmup - 1] = System.nanoTime() - t0;
        }
        echo.join();
        Arrays.sort(rtt);
        System.out.printf(Locale.ROOT, "baseline pingpong iterations=%d steady_us=%.3f%n", n, rtt[n / 2] / 2 / 1000.0);
    }

    private static void tcpSink(int port) throws IOException {
        try (ServerSocket server = new ServerSocket()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            try (Socket s = server.accept()) {
                DataInputStream in = new DataInputStream(s.getInputStream());
                OutputStream ack = s.getOutputStream();
                int size = in.readInt();
                long blocks = in.readLong();
                byte[] buffer = new byte[size];
                for (long b = 0; b < blocks; b++) in.readFully(buffer);
                ack.write(1); // every byte arrived: the source stops its clock
                ack.flush();
            }
        }
    }

    private static void tcpSource(int port, int size, int warmup, int n) throws IOException {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setTcpNoDelay(true);
            OutputStream out = s.getOutputStream();
            InputStream ack = s.getInputStream();
            byte[] header = new byte[12];
            java.nio.ByteBuffer.wrap(header).putInt(size).putLong((long) warmup + n);
            out.write(header);
            byte[] block = new byte[size];
            for (int i = 0; i < warmup; i++) out.write(block);
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) out.write(block);
            out.flush();
            if (ack.read() != 1) throw new IOException("the sink closed before it read every block");
            long nanos = System.nanoTime() - t0;
            System.out.printf(Locale.ROOT, "baseline tcp size=%d iterations=%d steady_MBps=%.2f%n",
                    size, n, (double) n * size * 1000.0 / nanos);
        }
    }
}
