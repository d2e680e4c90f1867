public import Foundation
import Synchronization

/// What one role executed, counted by `valgrind --tool=callgrind`: user-space instructions and
/// allocations (calls of `malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`), all
/// threads together.
///
/// Counts repeat to about 1 % for the same binary and input where timings on a shared VM move
/// ±15 %, so they show changes a timing cannot. They do not see the kernel (system calls, the
/// network stack) nor waiting: read them beside the time ratios, not instead of them.
public struct InstructionCount: Sendable {
    /// Instructions executed (callgrind's `Ir`).
    public var instructions: Double
    /// Allocations made.
    public var allocations: Double

    /// A count.
    /// - Parameters:
    ///   - instructions: instructions executed.
    ///   - allocations: allocations made.
    public init(instructions: Double, allocations: Double) {
        self.instructions = instructions
        self.allocations = allocations
    }

    /// `valgrind` on the `PATH`, or `nil`.
    public static var valgrind: URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let url = URL(fileURLWithPath: String(directory)).appendingPathComponent("valgrind")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return nil
    }

    /// `role` run under callgrind, writing its counts to `file`.
    /// - Parameters:
    ///   - role: the role.
    ///   - file: callgrind's output file.
    /// - Returns: the wrapped role.
    /// - Throws: ``BenchmarkError`` when valgrind is not installed.
    public static func counting(_ role: Role, into file: URL) throws -> Role {
        guard let valgrind else {
            throw BenchmarkError("--instructions needs valgrind (apt-get install -y valgrind)")
        }
        return Role(
            valgrind,
            ["--tool=callgrind", "--callgrind-out-file=\(file.path)", "--quiet", try withoutDebugInfo(role.executable).path]
                + role.arguments,
            environment: role.environment
        )
    }

    /// Copies of executables without their debug information, by original path: valgrind 3.19
    /// cannot read the DWARF 5 Swift writes (it gives up on the whole process); the symbol table
    /// stays, so functions keep their names.
    private static let stripped = Mutex<[String: URL]>([:])

    /// Removes the copies ``counting(_:into:)`` made.
    public static func removeCopies() {
        for copy in stripped.withLock({ $0.values }) { try? FileManager.default.removeItem(at: copy) }
        stripped.withLock { $0 = [:] }
    }

    /// A copy of `executable` without debug information (`objcopy --strip-debug`), made once per run.
    static func withoutDebugInfo(_ executable: URL) throws -> URL {
        if let copy = stripped.withLock({ $0[executable.path] }) { return copy }
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent(
            "coaty-callgrind-\(ProcessInfo.processInfo.processIdentifier)-\(executable.lastPathComponent)"
        )
        try? FileManager.default.removeItem(at: copy)
        let objcopy = Process()
        objcopy.executableURL = URL(fileURLWithPath: "/usr/bin/objcopy")
        objcopy.arguments = ["--strip-debug", executable.path, copy.path]
        try objcopy.run()
        objcopy.waitUntilExit()
        guard objcopy.terminationStatus == 0 else {
            throw BenchmarkError("objcopy --strip-debug \(executable.path) failed (apt-get install -y binutils)")
        }
        stripped.withLock { $0[executable.path] = copy }
        return copy
    }

    /// Reads the totals of a callgrind output file.
    /// - Parameter file: the file callgrind wrote.
    /// - Returns: its instructions and allocations.
    /// - Throws: ``BenchmarkError`` when the file is missing or has no totals.
    public static func read(_ file: URL) throws -> InstructionCount {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else {
            throw BenchmarkError("callgrind wrote no \(file.path)")
        }
        let allocators: Set<Substring> = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]
        var names: [Substring: Substring] = [:]
        var calledIsAllocator = false
        var instructions: Double?
        var allocations = 0.0
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("cfn=") {
                // `cfn=(id) name` defines a compressed name, `cfn=(id)` refers to one.
                let rest = line.dropFirst(4)
                var name = rest
                if rest.hasPrefix("("), let close = rest.firstIndex(of: ")") {
                    let id = rest[...close]
                    let given = rest[rest.index(after: close)...].drop { $0 == " " }
                    if given.isEmpty { name = names[id] ?? "" } else { names[id] = given; name = given }
                }
                calledIsAllocator = allocators.contains(name)
            } else if line.hasPrefix("calls=") {
                if calledIsAllocator, let count = Double(line.dropFirst(6).prefix { $0 != " " }) {
                    allocations += count
                }
                calledIsAllocator = false
            } else if line.hasPrefix("fn=") {
                // `fn=(id) name` defines names too (a callee named before it was called).
                let rest = line.dropFirst(3)
                if rest.hasPrefix("("), let close = rest.firstIndex(of: ")") {
                    let given = rest[rest.index(after: close)...].drop { $0 == " " }
                    if !given.isEmpty { names[rest[...close]] = given }
                }
            } else if line.hasPrefix("summary:") || line.hasPrefix("totals:") {
                let value = line.split(separator: " ").dropFirst().first.flatMap { Double($0) }
                instructions = max(instructions ?? 0, value ?? 0)
            }
        }
        guard let instructions else { throw BenchmarkError("no totals in \(file.path)") }
        return InstructionCount(instructions: instructions, allocations: allocations)
    }

    /// The cost of one unit of work: runs `measure` with `units` and with `2 × units` and divides
    /// the difference by the units added, so start-up, connection and shutdown cancel out.
    /// - Parameters:
    ///   - units: the shorter run's units of work (events, round trips).
    ///   - done: the units a run of `n` actually does (e.g. with its warm-up), for the divisor.
    ///   - measure: runs the counted role for `n` units, writing callgrind's output to the file.
    /// - Returns: instructions and allocations per unit.
    /// - Throws: what `measure` or ``read(_:)`` throws.
    public static func perUnit(
        units: Int,
        done: (Int) -> Int = { $0 },
        _ measure: (Int, URL) throws -> Void
    ) throws -> InstructionCount {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "coaty-callgrind-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var counts: [InstructionCount] = []
        for n in [units, 2 * units] {
            let file = directory.appendingPathComponent("run-\(n).out")
            try measure(n, file)
            counts.append(try read(file))
        }
        let added = Double(done(2 * units) - done(units))
        return InstructionCount(
            instructions: (counts[1].instructions - counts[0].instructions) / added,
            allocations: (counts[1].allocations - counts[0].allocations) / added
        )
    }
}
