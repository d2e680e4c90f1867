// The DNS-SD tests' own daemons: a D-Bus bus on a socket in a temporary directory and an
// avahi-daemon on the loopback interface only, both started once per test process and stopped when
// it exits. Nothing of the machine's D-Bus or avahi is used or changed.
//
// Loopback: avahi treats `lo` as relevant although it lacks the MULTICAST flag (it joins the mDNS
// group on it: "Joining mDNS multicast group on interface lo.IPv4"), so `allow-interfaces=lo`
// works without `ip link set lo multicast on` or a dummy interface.
//
// avahi-daemon keeps its pid file and socket at the fixed path /run/avahi-daemon, so a second
// daemon (the machine's, or another test process's) would refuse to start. It therefore runs in a
// mount namespace of its own with a private tmpfs on /run (`unshare --mount`). That needs root: in a
// user namespace (`unshare --user --map-root-user`) avahi cannot hand its runtime directory to the
// unmapped avahi user and stops ("Failed to create runtime directory"), so as non-root the tests skip.
import AgentProcessTestSupport
import CoatySync
import CoatyTesting
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The test process's D-Bus bus and avahi-daemon.
public struct DNSSDDaemons: Sendable {
    /// The D-Bus address of the private bus (`unix:path=…`): `DBUS_SYSTEM_BUS_ADDRESS` for DNS-SD clients.
    public let busAddress: String
    /// The temporary directory with the configurations, the socket and the daemons' logs.
    public let directory: String
    /// The host name avahi-daemon announces for 127.0.0.1, e.g. `coaty-test-1a2b3c4d.local`.
    public let hostName: String

    /// What a child process needs to reach the daemons (and to keep Avahi's compatibility warning off stderr).
    public var environment: [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": busAddress, "AVAHI_COMPAT_NOWARN": "1"]
    }

    /// The daemons, started at the first call and kept until the test process exits; the call
    /// also points `DBUS_SYSTEM_BUS_ADDRESS` of this process at them, so that in-process DNS-SD calls use them.
    /// - Returns: the running daemons.
    /// - Throws: ``TestSupportError`` saying what is missing or what failed (with the daemon's log).
    public static func shared() async throws -> DNSSDDaemons {
        try await startup.value
    }

    /// For `.enabled(if:)`: whether the DNS-SD tests can run. Starts the daemons; when they cannot
    /// start, the reason goes to stderr and the tests are skipped — except with `CI=true`, where this
    /// throws, so the tests fail.
    /// - Returns: whether the daemons run.
    /// - Throws: ``TestSupportError`` in CI when they cannot start.
    public static func availableOrFailingInCI() async throws -> Bool {
        do {
            _ = try await shared()
            return true
        } catch {
            if BrokerAvailability.isInCI { throw error }
            FileHandle.standardError.write(Data("DNS-SD tests skipped: \(error)\n".utf8))
            return false
        }
    }

    /// Started once (the lazy initialisation of a static is thread-safe), on a thread of its own: starting blocks.
    private static let startup = Task<DNSSDDaemons, any Error> {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try startBlocking() })
            }
        }
    }

    /// The daemons' process ids, signalled when the process exits.
    private static let running = CoatyMutex<(pids: [Int32], directory: String?)>(([], nil))

    private static func startBlocking() throws -> DNSSDDaemons {
        let dbusDaemon = try executable("dbus-daemon", package: "dbus")
        let avahiDaemon = try executable("avahi-daemon", package: "avahi-daemon")
        let unshare = try executable("unshare", package: "util-linux")
        guard getuid() == 0 else {
            throw TestSupportError(
                "the DNS-SD tests run avahi-daemon in a mount namespace of their own, which needs root"
            )
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-dnssd-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        atexit { DNSSDDaemons.stopAll() }
        running.withLock { $0.directory = directory }

        let socket = directory + "/bus.socket"
        try busConfiguration(socket: socket).write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        let bus = try spawn(
            dbusDaemon,
            ["--config-file=\(directory)/bus.conf", "--nofork", "--nopidfile"],
            log: directory + "/dbus.log"
        )
        running.withLock { $0.pids.append(bus) }
        try waitUntil("dbus-daemon listens at \(socket)", log: directory + "/dbus.log", pid: bus) {
            FileManager.default.fileExists(atPath: socket)
        }
        let busAddress = "unix:path=\(socket)"

        let hostName = "coaty-test-\(UUID().uuidString.prefix(8).lowercased())"
        try avahiConfiguration(hostName: hostName)
            .write(toFile: directory + "/avahi.conf", atomically: true, encoding: .utf8)
        // A private /run for the pid file and socket avahi keeps at /run/avahi-daemon.
        let arguments = [
            "--mount",
            "/bin/sh", "-c", "mount -t tmpfs tmpfs /run && exec \"$0\" \"$@\"", avahiDaemon,
            "--no-drop-root", "--no-chroot", "--no-rlimits", "--no-proc-title", "-f", directory + "/avahi.conf",
        ]
        // For avahi-daemon, and for the DNS-SD calls of this process.
        setenv("DBUS_SYSTEM_BUS_ADDRESS", busAddress, 1)
        setenv("AVAHI_COMPAT_NOWARN", "1", 1)
        let avahi = try spawn(unshare, arguments, log: directory + "/avahi.log")
        running.withLock { $0.pids.append(avahi) }
        try waitUntil("avahi-daemon is up on lo", log: directory + "/avahi.log", pid: avahi) {
            let log = (try? String(contentsOfFile: directory + "/avahi.log", encoding: .utf8)) ?? ""
            return log.contains("Server startup complete")
        }
        return DNSSDDaemons(busAddress: busAddress, directory: directory, hostName: hostName + ".local")
    }

    /// Stops the daemons and removes the directory (at exit).
    private static func stopAll() {
        let (pids, directory) = running.withLock { state in
            defer { state = ([], nil) }
            return state
        }
        for pid in pids.reversed() { kill(pid, SIGTERM) }
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// A bus that lets every local user own and call anything: it is private to the test.
    private static func busConfiguration(socket: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_destination="*"/>
            <allow send_type="method_call"/>
            <allow receive_sender="*"/>
          </policy>
        </busconfig>

        """
    }

    /// avahi on the loopback interface only, IPv4, announcing nothing but what the tests publish.
    private static func avahiConfiguration(hostName: String) -> String {
        """
        [server]
        host-name=\(hostName)
        use-ipv4=yes
        use-ipv6=no
        allow-interfaces=lo
        enable-dbus=yes
        ratelimit-interval-usec=1000000
        ratelimit-burst=1000
        [wide-area]
        enable-wide-area=no
        [publish]
        publish-hinfo=no
        publish-workstation=no

        """
    }

    /// The path of an installed executable, or an error naming its Debian package.
    private static func executable(_ name: String, package: String) throws -> String {
        for directory in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"] {
            let path = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw TestSupportError(
            "\(name) is not installed (Debian package \(package); Scripts/bootstrap installs it)"
        )
    }

    /// Starts `executable` with its stderr in `log` and this process's environment, with CoatyTesting's
    /// posix_spawn helper rather than Foundation's `Process`: both daemons close the descriptors they
    /// inherit at startup, and Process takes that end of file on its monitoring socket for the child's exit
    /// and blocks in `waitpid` on a shared thread, after which no other child of the test process is reaped.
    private static func spawn(_ executable: String, _ arguments: [String], log: String) throws -> Int32 {
        do {
            return try MosquittoBroker.spawn(executable, arguments: arguments, stderrPath: log)
        } catch {
            throw TestSupportError("cannot start \(executable): \(error)")
        }
    }

    /// Polls `condition` for up to 20 s; fails early when the daemon `pid` exits, with its log.
    private static func waitUntil(
        _ what: String,
        log: String,
        pid: Int32,
        _ condition: () -> Bool
    ) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if condition() { return }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) != 0 { break }
            usleep(50_000)
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let tail = text.split(separator: "\n").suffix(5).joined(separator: " | ")
        throw TestSupportError("cannot start the DNS-SD test daemons: waited in vain until \(what); log: \(tail)")
    }
}
