// A STAND-IN for Nextflow, for tests only: it is NOT Nextflow. See README.md next to it.
//
// Run by the `nextflow` launcher next to it (java's single-file source mode), as the JVM
// Nextflow's own launcher execs. It reads the pipeline's tasks from ./tasks.tsv and runs them
// the way Nextflow's engine does, as seen from the kernel: a `.command.run` wrapper per task
// in work/<2 hex>/<30 hex>, started with java.lang.ProcessBuilder from a thread pool as
// LocalTaskHandler does (`/bin/bash -ue .command.run`, cwd the work dir, stdout+stderr to
// .command.log), or submitted with `sbatch .command.run` from the work dir as the Slurm
// executor does, then polled for its .exitcode. It records the run in .nextflow/history and
// .nextflow.log as Nextflow does.
import java.io.*;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.security.MessageDigest;
import java.text.SimpleDateFormat;
import java.util.*;
import java.util.concurrent.*;
import java.util.regex.*;

public class NextflowStandIn {

    static final String DEFAULT_VERSION = "24.10.4";
    static final List<String> BASH = List.of("/bin/bash", "-ue");
    static final List<String> NFCORE_SHELL = List.of("bash", "-C", "-e", "-u", "-o", "pipefail");

    public static void main(String[] argv) throws Exception {
        // -D options before the command went to the JVM (the launcher took them); skip them
        int k = 0;
        while (k < argv.length && argv[k].startsWith("-D")) k++;
        String[] args = Arrays.copyOfRange(argv, k, argv.length);
        if (args.length < 2 || !args[0].equals("run") || args[1].startsWith("-")) {
            System.err.println("stand-in for Nextflow (tests only): usage: nextflow run PIPELINE [options]"
                + " -- only `run` is supported");
            System.exit(2);
        }
        Run run;
        try {
            run = new Run(args);
        } catch (IllegalArgumentException e) {
            System.err.println("stand-in for Nextflow: " + e.getMessage());
            System.exit(2);
            return;
        }
        System.exit(run.execute());
    }

    // ---------------------------------------------------------------- small helpers

    static String md5(String s) {
        try {
            MessageDigest md = MessageDigest.getInstance("MD5");
            StringBuilder b = new StringBuilder();
            for (byte x : md.digest(s.getBytes(StandardCharsets.UTF_8))) b.append(String.format("%02x", x));
            return b.toString();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** Nextflow's Escape.path: backslash the characters a shell would interpret. */
    static String esc(String p) {
        return p.replaceAll("([ ()\\[\\]{}'\"$&;|<>*?!#`\\\\])", "\\\\$1");
    }

    static String esc(Path p) {
        return esc(p.toString());
    }

    /** Compare "24.04.1" style versions on their first three numbers. */
    static int cmpVer(String a, String b) {
        String[] x = a.split("\\."), y = b.split("\\.");
        for (int i = 0; i < 3; i++) {
            int u = i < x.length ? num(x[i]) : 0, v = i < y.length ? num(y[i]) : 0;
            if (u != v) return Integer.compare(u, v);
        }
        return 0;
    }

    static int num(String s) {
        String d = s.replaceAll("[^0-9].*$", "");
        return d.isEmpty() ? 0 : Integer.parseInt(d);
    }

    /** Nextflow's Duration.toString, near enough: 850ms, 2.3s, 1m 5s, 1h 2m 3s. */
    static String duration(long ms) {
        if (ms < 1000) return ms + "ms";
        if (ms < 60_000) return String.format(Locale.ROOT, "%.1fs", ms / 1000.0);
        long s = ms / 1000, h = s / 3600, m = (s % 3600) / 60, r = s % 60;
        return (h > 0 ? h + "h " : "") + m + "m " + r + "s";
    }

    static String memory(long kb) {
        double b = kb * 1024.0;
        String[] u = {"B", "KB", "MB", "GB", "TB"};
        int i = 0;
        while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
        return i == 0 ? ((long) b) + " B" : String.format(Locale.ROOT, "%.1f %s", b, u[i]);
    }

    static long parseMillis(String v) {
        Matcher m = Pattern.compile("(\\d+(?:\\.\\d+)?)\\s*(ms|s|sec|m|min)?").matcher(v.trim());
        if (!m.matches()) throw new IllegalArgumentException("not a duration: " + v);
        double n = Double.parseDouble(m.group(1));
        String u = m.group(2) == null ? "ms" : m.group(2);
        return (long) (u.equals("ms") ? n : u.startsWith("s") ? n * 1000 : n * 60_000);
    }

    /** A process.shell value as given on the command line: `bash -C -e` or `['bash','-C']`. */
    static List<String> parseShell(String v) {
        String s = v.trim();
        List<String> out = new ArrayList<>();
        if (s.startsWith("[")) {
            Matcher m = Pattern.compile("['\"]([^'\"]*)['\"]").matcher(s);
            while (m.find()) out.add(m.group(1));
        } else {
            for (String w : s.split("\\s+")) if (!w.isEmpty()) out.add(w);
        }
        if (out.isEmpty()) throw new IllegalArgumentException("empty process.shell");
        return out;
    }

    static String readText(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return null;
        }
    }

    static String resource(String name) throws IOException {
        // next to this source file: the launcher passes its directory
        String dir = System.getProperty("nxf.standin.home");
        if (dir == null) throw new IOException("nxf.standin.home is not set (start through the `nextflow` launcher)");
        return Files.readString(Paths.get(dir, name));
    }

    // ---------------------------------------------------------------- the log

    static final class Log {
        final PrintWriter out;
        final SimpleDateFormat fmt = new SimpleDateFormat("MMM-dd HH:mm:ss.SSS", Locale.ENGLISH);

        Log(Path file) throws IOException {
            // Nextflow keeps the previous logs as .nextflow.log.1, .2, ...
            for (int i = 8; i >= 0; i--) {
                Path from = i == 0 ? file : Paths.get(file + "." + i);
                if (Files.exists(from)) Files.move(from, Paths.get(file + "." + (i + 1)), StandardCopyOption.REPLACE_EXISTING);
            }
            out = new PrintWriter(Files.newBufferedWriter(file, StandardCharsets.UTF_8));
        }

        synchronized void line(String level, String logger, String msg) {
            out.printf("%s [%s] %-5s %s - %s%n", fmt.format(new Date()), Thread.currentThread().getName(), level, logger, msg);
            out.flush();
        }

        void debug(String logger, String msg) { line("DEBUG", logger, msg); }
        void info(String logger, String msg) { line("INFO", logger, msg); }
        void error(String logger, String msg) { line("ERROR", logger, msg); }
    }

    // ---------------------------------------------------------------- .nextflow/history

    static final class History {
        final Path file;
        final SimpleDateFormat fmt = new SimpleDateFormat("yyyy-MM-dd HH:mm:ss");

        History(Path file) { this.file = file; }

        interface Body { void run() throws IOException; }

        void locked(Body body) throws IOException {
            Files.createDirectories(file.getParent());
            Path lock = Paths.get(file + ".lock");
            try (FileChannel ch = FileChannel.open(lock, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
                 FileLock l = ch.lock()) {
                body.run();
            }
        }

        void write(Date when, String runName, String revision, String session, String command) throws IOException {
            String line = String.join("\t", fmt.format(when), "-", runName, "-", revision, session, command) + "\n";
            locked(() -> Files.writeString(file, line, StandardOpenOption.CREATE, StandardOpenOption.APPEND));
        }

        void update(String runName, boolean ok, long startedAt) throws IOException {
            locked(() -> {
                StringBuilder b = new StringBuilder();
                for (String l : Files.readAllLines(file)) {
                    String[] c = l.split("\t", -1);
                    if (c.length == 7 && c[2].equals(runName)) {
                        c[1] = duration(System.currentTimeMillis() - startedAt);
                        c[3] = ok ? "OK" : "ERR";
                        l = String.join("\t", c);
                    }
                    b.append(l).append('\n');
                }
                Files.writeString(file, b.toString());
            });
        }
    }

    // ---------------------------------------------------------------- a task

    static final class Task {
        int id;
        String name;
        String headerFormat; // new | old
        boolean traced;      // launched through nxf_trace
        String script;
        List<Path> inputs = new ArrayList<>();
        String hash;
        Path workDir;
        // runtime
        volatile Process process;
        Future<Integer> future;
        String jobId;
        long submitAt, startAt, endAt;
        Integer exit;
        String error;
        String status = "NEW";
        long lastSeenInQueue;

        String shortHash() { return hash.substring(0, 2) + "/" + hash.substring(2, 8); }
    }

    // ---------------------------------------------------------------- the run

    static final class Run {
        final String[] args;
        final String pipeline;
        final Path launchDir = Paths.get("").toAbsolutePath();
        Path workRoot;
        String nxfVer;
        String executor;
        String errorStrategy = "terminate";
        List<String> shell = NFCORE_SHELL;
        Integer maxForks;
        Integer queueSize;
        long pollMillis;
        boolean statsEnabled;
        String traceFile, reportFile, timelineFile;
        String runName;
        String session = UUID.randomUUID().toString();
        final List<Task> tasks = new ArrayList<>();
        Log log;
        final long startedAt = System.currentTimeMillis();
        final ExecutorService execService = Executors.newCachedThreadPool(new ThreadFactory() {
            int n = 0;
            public synchronized Thread newThread(Runnable r) {
                Thread t = new Thread(r, "TaskExecutor-" + (++n));
                t.setDaemon(true);
                return t;
            }
        });

        Run(String[] args) {
            this.args = args;
            this.pipeline = args[1];
            String env = System.getenv("NXF_STANDIN_EXECUTOR");
            executor = env != null && !env.isEmpty() ? env : "local";
            String ver = System.getenv("NXF_VER");
            nxfVer = ver != null && !ver.isEmpty() ? ver : DEFAULT_VERSION;
            String work = System.getenv("NXF_WORK");
            workRoot = launchDir.resolve(work != null && !work.isEmpty() ? work : "work");
            Map<String, String> execOpts = new HashMap<>();
            String ts = new SimpleDateFormat("yyyy-MM-dd_HH-mm-ss").format(new Date());
            for (int i = 2; i < args.length; i++) {
                String a = args[i];
                String next = i + 1 < args.length && !args[i + 1].startsWith("-") ? args[i + 1] : null;
                if (a.startsWith("-process.") || a.startsWith("-executor.")) {
                    int eq = a.indexOf('=');
                    String key, val;
                    if (eq > 0) { key = a.substring(1, eq); val = a.substring(eq + 1); }
                    else if (next != null) { key = a.substring(1); val = next; i++; }
                    else throw new IllegalArgumentException("missing value for " + a);
                    if (key.startsWith("executor.")) { execOpts.put(key.substring(9), val); continue; }
                    switch (key.substring(8)) {
                        case "executor": executor = val; break;
                        case "errorStrategy": errorStrategy = val; break;
                        case "shell": shell = parseShell(val); break;
                        case "maxForks": maxForks = Integer.parseInt(val); break;
                        default: break; // other process settings: accepted, unused
                    }
                } else if (a.equals("-with-trace")) {
                    statsEnabled = true; traceFile = next != null ? next : "trace-" + ts + ".txt"; if (next != null) i++;
                } else if (a.equals("-with-report")) {
                    statsEnabled = true; reportFile = next != null ? next : "report-" + ts + ".html"; if (next != null) i++;
                } else if (a.equals("-with-timeline")) {
                    statsEnabled = true; timelineFile = next != null ? next : "timeline-" + ts + ".html"; if (next != null) i++;
                } else if (a.equals("-w") || a.equals("-work-dir")) {
                    if (next == null) throw new IllegalArgumentException("missing value for " + a);
                    workRoot = launchDir.resolve(next); i++;
                } else if (a.equals("-name")) {
                    if (next == null) throw new IllegalArgumentException("missing value for " + a);
                    runName = next; i++;
                } else if (Set.of("-c", "-config", "-profile", "-params-file", "-r", "-revision", "-ansi-log",
                        "-entry", "-with-conda", "-with-docker").contains(a)) {
                    if (next != null) i++; // accepted, unused
                } else if (Set.of("-resume", "-bg", "-latest", "-q", "-quiet", "-stub", "-stub-run",
                        "-with-dag", "-dump-hashes").contains(a)) {
                    if (a.equals("-resume") && next != null && next.matches("[0-9a-f-]{36}")) i++;
                } else if (a.startsWith("--")) {
                    if (!a.contains("=") && next != null) i++; // a pipeline parameter
                } else {
                    throw new IllegalArgumentException("Unknown option: " + a + " -- Check the available commands and options and syntax with 'help'");
                }
            }
            if (!executor.equals("local") && !executor.equals("slurm"))
                throw new IllegalArgumentException("executor `" + executor + "`: the stand-in knows `local` and `slurm`");
            if (!Set.of("terminate", "finish", "ignore").contains(errorStrategy))
                throw new IllegalArgumentException("errorStrategy `" + errorStrategy + "`: the stand-in knows terminate, finish, ignore");
            if (execOpts.containsKey("queueSize")) queueSize = Integer.parseInt(execOpts.get("queueSize"));
            // Nextflow polls local tasks every 100 ms and grid jobs every 5 s; the stand-in
            // polls grid jobs every second (executor.pollInterval) to keep tests short.
            pollMillis = parseMillis(execOpts.getOrDefault("pollInterval", executor.equals("local") ? "100ms" : "1s"));
            if (runName == null) runName = randomName();
        }

        static String randomName() {
            String[] adj = {"admiring", "agitated", "boring", "clever", "distracted", "elated", "focused",
                "gloomy", "hungry", "jovial", "modest", "nostalgic", "pensive", "sharp", "tiny", "zen"};
            String[] who = {"curie", "darwin", "euler", "franklin", "galileo", "hopper", "kepler",
                "lovelace", "mendel", "newton", "pasteur", "ramanujan", "shannon", "turing", "volta", "wright"};
            Random r = new Random();
            return adj[r.nextInt(adj.length)] + "_" + who[r.nextInt(who.length)];
        }

        boolean newHeader() { return cmpVer(nxfVer, "24.04.0") >= 0; }

        String shebang() {
            String s = String.join(" ", shell);
            return s.startsWith("/") ? "#!" + s : "#!/usr/bin/env " + s;
        }

        String shellPath() {
            return shell.equals(BASH) ? "/bin/bash" : String.join(" ", shell);
        }

        int capacity() {
            int c = queueSize != null ? queueSize
                : executor.equals("local") ? Runtime.getRuntime().availableProcessors() : 100;
            if (maxForks != null && maxForks > 0) c = Math.min(c, maxForks);
            return Math.max(1, c);
        }

        void readTasks() throws IOException {
            Path tsv = launchDir.resolve("tasks.tsv");
            if (!Files.exists(tsv)) throw new IOException("no tasks.tsv in " + launchDir + " (the stand-in's pipeline)");
            int i = 0;
            for (String line : Files.readAllLines(tsv)) {
                if (line.isBlank() || line.startsWith("#")) continue;
                String[] c = line.split("\t", 4);
                if (c.length < 3) throw new IOException("tasks.tsv: want format<TAB>name<TAB>script[<TAB>inputs]: " + line);
                Task t = new Task();
                t.id = ++i;
                String f = c[0].trim();
                t.traced = f.equals("traced") || statsEnabled;
                t.headerFormat = f.equals("old") ? "old" : (f.equals("new") || f.equals("traced")) ? "new" : newHeader() ? "new" : "old";
                t.name = c[1];
                t.script = c[2];
                if (c.length > 3) {
                    String in = c[3].trim();
                    if (!in.isEmpty() && !in.equals("-"))
                        for (String p : in.split(",")) t.inputs.add(launchDir.resolve(p.trim()).normalize());
                } else if (Files.exists(launchDir.resolve("in.txt"))) {
                    t.inputs.add(launchDir.resolve("in.txt"));
                }
                t.hash = md5(session + "\u0000" + t.name + "\u0000" + t.id + "\u0000" + t.script);
                t.workDir = workRoot.resolve(t.hash.substring(0, 2)).resolve(t.hash.substring(2));
                tasks.add(t);
            }
        }

        // ------------------------------------------------------------ the wrapper

        static String jobName(String name) {
            // As Nextflow's AbstractGridExecutor: " / : @ * ? \n \t \r =" become "_", the
            // rest is kept; at most 256 characters.
            StringBuilder b = new StringBuilder("nf-");
            for (char ch : name.toCharArray()) {
                b.append(" /:@*?\n\t\r=".indexOf(ch) >= 0 ? '_' : ch);
            }
            return b.length() > 256 ? b.substring(0, 256) : b.toString();
        }

        void writeWrapper(Task t) throws IOException {
            Files.createDirectories(t.workDir);
            Path run = t.workDir.resolve(".command.run");
            Path sh = t.workDir.resolve(".command.sh");

            // .command.sh: the script, its indentation stripped, a shebang from process.shell
            String body = t.script.stripIndent().trim() + "\n";
            if (!body.startsWith("#!")) body = shebang() + "\n" + body;
            Files.writeString(sh, body);
            String interpreter = body.substring(2, body.indexOf('\n'));

            StringBuilder header = new StringBuilder();
            if (executor.equals("slurm")) {
                boolean legacy = cmpVer(nxfVer, "23.02.0") < 0; // before 23.02 the directory was `-D`
                if (legacy) header.append("#SBATCH -D ").append(esc(t.workDir)).append('\n');
                header.append("#SBATCH -J ").append(jobName(t.name)).append('\n');
                header.append("#SBATCH -o ").append(esc(t.workDir.resolve(".command.log"))).append('\n');
                header.append("#SBATCH --no-requeue\n");
                if (cmpVer(nxfVer, "21.10.0") >= 0) header.append("#SBATCH --signal B:USR2@30\n");
                if (!legacy) header.append("NXF_CHDIR=").append(esc(t.workDir)).append('\n');
            }
            String metadata = t.headerFormat.equals("new")
                ? "### ---\n### name: '" + t.name + "'\n### ...\n"
                : "# NEXTFLOW TASK: " + t.name + "\n";

            String traceCmd = interpreter + " " + esc(sh);
            String launch = t.traced ? shellPath() + " " + esc(run) + " nxf_trace" : traceCmd;

            StringBuilder stage = new StringBuilder();
            List<String> links = new ArrayList<>();
            for (Path in : t.inputs) {
                String name = in.getFileName().toString();
                if (t.inputs.size() < 100) stage.append("    rm -f ").append(esc(name)).append('\n');
                links.add("    ln -sfn " + esc(in) + " " + esc(name) + "\n");
            }
            for (String l : links) stage.append(l);

            String text = resource("command-run.tmpl")
                .replace("{{header}}", header.toString())
                .replace("{{metadata}}", metadata)
                .replace("{{trace_script}}", t.traced ? resource("command-trace.tmpl").replace("{{trace_cmd}}", traceCmd) : "")
                .replace("{{launch_cmd}}", launch)
                .replace("{{stage_inputs}}", stage.toString())
                .replace("{{exit_file}}", esc(t.workDir.resolve(".exitcode")))
                .replace("{{begin_file}}", esc(t.workDir.resolve(".command.begin")));
            Files.writeString(run, text);
        }

        // ------------------------------------------------------------ submitting

        void submit(Task t) throws IOException {
            writeWrapper(t);
            t.submitAt = System.currentTimeMillis();
            t.status = "SUBMITTED";
            if (executor.equals("local")) {
                // LocalTaskHandler: bash -ue .command.run, in the work dir, all output to .command.log
                String debug = System.getenv("NXF_DEBUG");
                List<String> cmd = new ArrayList<>(List.of("/bin/bash",
                    debug != null && debug.matches("[1-9][0-9]*") ? "-uex" : "-ue"));
                cmd.add(".command.run");
                log.debug("n.executor.local.LocalTaskHandler", "Launch cmd line: " + String.join(" ", cmd));
                ProcessBuilder pb = new ProcessBuilder()
                    .redirectErrorStream(true)
                    .redirectOutput(t.workDir.resolve(".command.log").toFile())
                    .directory(t.workDir.toFile())
                    .command(cmd);
                // started from the executor's thread pool, as Nextflow does
                t.future = execService.submit(() -> {
                    t.process = pb.start();
                    t.startAt = System.currentTimeMillis();
                    return t.process.waitFor();
                });
            } else {
                // GridTaskHandler: `sbatch .command.run` in the work dir, output merged
                ProcessBuilder pb = new ProcessBuilder().command("sbatch", ".command.run")
                    .redirectErrorStream(true).directory(t.workDir.toFile());
                String out;
                int rc;
                try {
                    Process p = pb.start();
                    out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                    rc = p.waitFor();
                } catch (IOException | InterruptedException e) {
                    throw new IOException("Failed to submit process to grid scheduler for execution: " + e.getMessage());
                }
                Matcher m = Pattern.compile("Submitted batch job (\\d+)").matcher(out);
                if (rc != 0 || !m.find())
                    throw new IOException("Failed to submit process to grid scheduler for execution\n  Command executed:\n    sbatch .command.run\n  Command exit status:\n    " + rc + "\n  Command output:\n    " + out.trim());
                t.jobId = m.group(1);
                t.lastSeenInQueue = System.currentTimeMillis();
                log.debug("nextflow.executor.GridTaskHandler", "[SLURM] submitted process " + t.name + " > jobId: " + t.jobId + "; workDir: " + t.workDir);
            }
            String msg = "[" + t.shortHash() + "] Submitted process > " + t.name;
            log.info("nextflow.Session", msg);
            System.out.println(msg);
        }

        long lastQueueStat = 0;
        Set<String> queued = new HashSet<>();

        /** squeue, as the Slurm executor asks for its jobs' states. */
        void queueStatus() {
            List<String> cmd = new ArrayList<>(List.of("squeue", "--noheader", "-o", "%i %t", "-t", "all"));
            String user = System.getProperty("user.name");
            if (user != null) { cmd.add("-u"); cmd.add(user); }
            try {
                Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                if (p.waitFor() != 0) return;
                Set<String> now = new HashSet<>();
                for (String l : out.split("\n")) {
                    String[] c = l.trim().split("\\s+");
                    if (c.length == 2 && Set.of("PD", "R", "CG", "CF", "S", "ST").contains(c[1])) now.add(c[0]);
                }
                queued = now;
                lastQueueStat = System.currentTimeMillis();
            } catch (IOException | InterruptedException e) {
                log.debug("nextflow.executor.GridTaskHandler", "Failed to fetch queue status: " + e.getMessage());
            }
        }

        /** Whether a task ended; sets its exit status. */
        boolean completed(Task t) {
            if (executor.equals("local")) {
                if (!t.future.isDone()) return false;
                try {
                    t.exit = t.future.get();
                } catch (Exception e) {
                    t.exit = Integer.MAX_VALUE;
                    t.error = String.valueOf(e.getCause());
                }
            } else {
                String text = readText(t.workDir.resolve(".exitcode"));
                if (text == null || text.isBlank()) {
                    long now = System.currentTimeMillis();
                    if (queued.contains(t.jobId)) t.lastSeenInQueue = now;
                    // gone from the queue with no exit file: Nextflow waits `exitReadTimeout` (270 s)
                    if (now - t.lastSeenInQueue < 270_000) return false;
                    t.exit = Integer.MAX_VALUE;
                    t.error = "Process terminated for an unknown reason -- Likely it has been terminated by the external system";
                } else {
                    try { t.exit = Integer.parseInt(text.trim()); } catch (NumberFormatException e) { t.exit = Integer.MAX_VALUE; }
                }
            }
            t.endAt = System.currentTimeMillis();
            t.status = "COMPLETED";
            return true;
        }

        void kill(Task t) {
            try {
                if (executor.equals("local")) {
                    Process p = t.process;
                    if (p == null || !p.isAlive()) return;
                    // LocalTaskHandler.killTask: bash -c 'kill -TERM <pid>'
                    new ProcessBuilder("bash", "-c", "kill -TERM " + p.pid()).redirectErrorStream(true).start().waitFor();
                } else if (t.jobId != null) {
                    new ProcessBuilder("scancel", t.jobId).redirectErrorStream(true).start().waitFor();
                }
            } catch (IOException | InterruptedException e) {
                log.debug("nextflow.processor.TaskProcessor", "Unable to kill " + t.name + ": " + e.getMessage());
            }
        }

        // ------------------------------------------------------------ the run itself

        int execute() throws Exception {
            Files.createDirectories(launchDir.resolve(".nextflow"));
            log = new Log(launchDir.resolve(".nextflow.log"));
            Thread.currentThread().setName("main");
            String cli = "nextflow " + String.join(" ", args);
            log.debug("nextflow.cli.Launcher", "$> " + cli);
            log.debug("nextflow.cli.CmdRun", "N E X T F L O W  ~  version " + nxfVer + " (stand-in)");
            String revision = md5(pipeline).substring(0, 10);
            History history = new History(launchDir.resolve(".nextflow/history"));
            history.write(new Date(startedAt), runName, revision, session, cli);
            System.out.println("\n N E X T F L O W   ~  version " + nxfVer + " (test stand-in)\n");
            String launching = "Launching `" + pipeline + "` [" + runName + "] DSL2 - revision: " + revision;
            System.out.println(launching + "\n");
            log.info("nextflow.cli.CmdRun", launching);
            log.debug("nextflow.Session", "Session UUID: " + session);
            log.debug("nextflow.Session", "Run name: " + runName);
            log.debug("nextflow.Session", "Work-dir: " + workRoot);
            log.debug("nextflow.executor.Executor", "[" + executor + "] Starting executor");

            // killed (SIGTERM, SIGINT): abort as Nextflow's session does, killing the tasks
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                if (finished) return;
                log.debug("nextflow.Session", "Session aborted -- Cause: the JVM is shutting down");
                synchronized (running) { for (Task t : running) kill(t); }
                try { history.update(runName, false, startedAt); } catch (IOException e) { /* best effort */ }
            }, "Thread-shutdown"));
            boolean ok;
            try {
                readTasks();
                ok = schedule();
            } catch (IOException e) {
                log.error("nextflow.cli.Launcher", e.getMessage());
                System.err.println("ERROR ~ " + e.getMessage());
                ok = false;
            }
            if (statsEnabled) writeReports();
            log.debug("nextflow.Session", "Session await > all processes finished");
            history.update(runName, ok, startedAt);
            finished = true;
            log.debug("nextflow.util.ThreadPoolManager", "Thread pool shutdown");
            log.debug("nextflow.script.ScriptRunner", "> Execution complete -- Goodbye");
            execService.shutdownNow();
            return ok ? 0 : 1;
        }

        final List<Task> running = Collections.synchronizedList(new ArrayList<>());
        volatile boolean finished;

        boolean schedule() throws Exception {
            Deque<Task> pending = new ArrayDeque<>(tasks);
            boolean stop = false, failed = false;
            int cap = capacity();
            log.debug("n.processor.TaskPollingMonitor", "Creating task monitor for executor '" + executor
                + "' > capacity: " + cap + "; pollInterval: " + pollMillis + "ms");
            while ((!stop && !pending.isEmpty()) || !running.isEmpty()) {
                while (!stop && !pending.isEmpty() && running.size() < cap) {
                    Task t = pending.poll();
                    try {
                        submit(t);
                        running.add(t);
                    } catch (IOException e) {
                        t.status = "FAILED"; t.error = e.getMessage(); t.exit = Integer.MAX_VALUE;
                        fail(t);
                        failed = true;
                        if (!errorStrategy.equals("ignore")) stop = true;
                        if (errorStrategy.equals("terminate")) terminate(running);
                    }
                }
                if (executor.equals("slurm") && System.currentTimeMillis() - lastQueueStat >= 60_000) queueStatus();
                for (Task t : new ArrayList<>(running)) {
                    if (!completed(t)) continue;
                    running.remove(t);
                    String exit = t.exit == Integer.MAX_VALUE ? "-" : String.valueOf(t.exit);
                    log.debug("n.processor.TaskPollingMonitor", "Task completed > TaskHandler[" + (t.jobId != null ? "jobId: " + t.jobId + "; " : "id: " + t.id + "; ")
                        + "name: " + t.name + "; status: COMPLETED; exit: " + exit + "; error: " + (t.error != null ? t.error : "-")
                        + "; workDir: " + t.workDir + "]");
                    if (t.exit != 0) {
                        if (errorStrategy.equals("ignore")) {
                            log.info("nextflow.processor.TaskProcessor", "[" + t.shortHash() + "] NOTE: Process `" + t.name + "` terminated with an error exit status (" + exit + ") -- Error is ignored");
                            continue;
                        }
                        failed = true;
                        if (!stop) fail(t);
                        stop = true;
                        if (errorStrategy.equals("terminate")) terminate(running);
                    }
                }
                if (!running.isEmpty() || (!stop && !pending.isEmpty())) Thread.sleep(pollMillis);
            }
            return !failed;
        }

        void fail(Task t) {
            String exit = t.exit == Integer.MAX_VALUE ? "-" : String.valueOf(t.exit);
            String msg = "Error executing process > '" + t.name + "'";
            log.error("nextflow.processor.TaskProcessor", msg + "\n\nCaused by:\n  " + (t.error != null ? t.error
                : "Process `" + t.name + "` terminated with an error exit status (" + exit + ")") + "\n\nWork dir:\n  " + t.workDir);
            System.err.println("ERROR ~ " + msg + "\n\nCaused by:\n  "
                + (t.error != null ? t.error : "Process `" + t.name + "` terminated with an error exit status (" + exit + ")")
                + "\n\nWork dir:\n  " + t.workDir + "\n");
            if (errorStrategy.equals("finish"))
                log.info("nextflow.Session", "Execution cancelled -- Finishing pending tasks before exit");
        }

        /** errorStrategy terminate: kill what runs, let the wrappers write their exit files. */
        void terminate(List<Task> running) throws InterruptedException {
            List<Task> all;
            synchronized (running) { all = new ArrayList<>(running); }
            for (Task t : all) kill(t);
            long until = System.currentTimeMillis() + 5_000;
            for (Task t : all) {
                if (executor.equals("local")) {
                    try { t.future.get(Math.max(1, until - System.currentTimeMillis()), TimeUnit.MILLISECONDS); } catch (Exception e) { /* gone */ }
                }
                t.status = "ABORTED";
                log.debug("n.processor.TaskPollingMonitor", "Task aborted > TaskHandler[name: " + t.name + "; workDir: " + t.workDir + "]");
            }
            running.clear();
        }

        // ------------------------------------------------------------ trace / report

        Map<String, String> metrics(Task t) {
            Map<String, String> m = new HashMap<>();
            String text = readText(t.workDir.resolve(".command.trace"));
            if (text == null) return m;
            for (String l : text.split("\n")) {
                int eq = l.indexOf('=');
                if (eq > 0) m.put(l.substring(0, eq), l.substring(eq + 1));
            }
            return m;
        }

        void writeReports() throws IOException {
            SimpleDateFormat f = new SimpleDateFormat("yyyy-MM-dd HH:mm:ss.SSS");
            StringBuilder trace = new StringBuilder("task_id\thash\tnative_id\tname\tstatus\texit\tsubmit\tduration\trealtime\t%cpu\tpeak_rss\tpeak_vmem\trchar\twchar\n");
            for (Task t : tasks) {
                if (t.submitAt == 0) continue;
                Map<String, String> m = metrics(t);
                String native_id = t.jobId != null ? t.jobId : t.process != null ? String.valueOf(t.process.pid()) : "-";
                String st = t.status.equals("ABORTED") ? "ABORTED" : t.exit != null && t.exit == 0 ? "COMPLETED" : "FAILED";
                trace.append(String.join("\t", String.valueOf(t.id), t.shortHash(), native_id, t.name, st,
                    t.exit == null || t.exit == Integer.MAX_VALUE ? "-" : String.valueOf(t.exit), f.format(new Date(t.submitAt)),
                    t.endAt > 0 ? duration(t.endAt - t.submitAt) : "-",
                    m.containsKey("realtime") ? duration(Long.parseLong(m.get("realtime"))) : "-",
                    m.containsKey("%cpu") ? m.get("%cpu") + ".0%" : "-",
                    m.containsKey("peak_rss") ? memory(Long.parseLong(m.get("peak_rss"))) : "-",
                    m.containsKey("peak_vmem") ? memory(Long.parseLong(m.get("peak_vmem"))) : "-",
                    m.containsKey("rchar") ? memory(Long.parseLong(m.get("rchar")) / 1024) : "-",
                    m.containsKey("wchar") ? memory(Long.parseLong(m.get("wchar")) / 1024) : "-")).append('\n');
            }
            if (traceFile != null) Files.writeString(launchDir.resolve(traceFile), trace.toString());
            String html = "<!DOCTYPE html>\n<html><head><title>[" + runName + "] Nextflow Workflow Report (stand-in)</title></head>\n<body>\n<h1>Workflow report: "
                + runName + "</h1>\n<p>Session " + session + ", stand-in for tests, not Nextflow.</p>\n<pre>\n"
                + trace.toString().replace("&", "&amp;").replace("<", "&lt;") + "</pre>\n</body></html>\n";
            if (reportFile != null) Files.writeString(launchDir.resolve(reportFile), html);
            if (timelineFile != null) Files.writeString(launchDir.resolve(timelineFile), html);
        }
    }
}
