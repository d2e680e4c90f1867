public import CoatyCore
public import Foundation

/// An error that ends a benchmark run, saying what went wrong.
public struct BenchmarkError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String

    /// An error with a message.
    /// - Parameter description: what went wrong.
    public init(_ description: String) { self.description = description }
}

/// Writes one line to standard output unbuffered, so a driver reading the pipe sees it at once.
/// - Parameter line: the line, without its newline.
public func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes a JSON object as one line to standard output (a role's result for its driver).
/// - Parameter object: the result.
public func emit(_ object: JSONObject) {
    emit(JSONValue.object(object).serializedString())
}

/// Waits until standard input ends: a role that must stay connected until its driver has read
/// the other side's result calls it (the driver's ``Child/closeInput()`` ends it).
public func waitForEndOfInput() {
    _ = FileHandle.standardInput.readDataToEndOfFile()
}

/// This executable, with symbolic links resolved.
public var currentExecutable: URL {
    URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
}

/// An executable built beside this one (release products share `.build/release`).
/// - Parameter product: the product name, e.g. `mqtt-baseline`.
/// - Returns: its URL.
/// - Throws: ``BenchmarkError`` saying how to build it when it is missing.
public func siblingExecutable(_ product: String) throws -> URL {
    let url = currentExecutable.deletingLastPathComponent().appendingPathComponent(product)
    guard FileManager.default.isExecutableFile(atPath: url.path) else {
        throw BenchmarkError("\(url.path) not found: build it with `swift build -c release --product \(product)`")
    }
    return url
}

/// A child process (a benchmark role) whose standard output is read line by line.
public final class Child {
    /// The process.
    public let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private var buffer: [UInt8] = []

    /// Starts `executable` with `arguments`.
    /// - Parameters:
    ///   - executable: the program.
    ///   - arguments: its arguments (the role first).
    ///   - environment: variables set in its environment (on top of this process's).
    /// - Throws: when the process cannot be started.
    public init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = output
        process.standardInput = input
        try process.run()
    }

    private var name: String {
        "\(process.executableURL?.lastPathComponent ?? "child") \(process.arguments?.first ?? "")"
    }

    /// The next line of output, or `nil` at end of file.
    /// - Returns: the line without its newline.
    public func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self) }
            buffer.append(contentsOf: chunk)
        }
    }

    /// The first output line that is a JSON object (the role's result).
    /// - Returns: the object.
    /// - Throws: ``BenchmarkError`` when the output ends first.
    public func readJSON() throws -> JSONObject {
        while let line = readLine() {
            if line.hasPrefix("{"), let object = (try? JSONValue(parsing: line))?.objectValue { return object }
        }
        throw BenchmarkError("\(name) ended without a result")
    }

    /// Waits for the line `ready` (the role is connected and subscribed).
    /// - Throws: ``BenchmarkError`` when anything else comes first.
    public func expectReady() throws {
        guard readLine() == "ready" else { throw BenchmarkError("\(name) did not get ready") }
    }

    /// Closes the child's standard input (roles that wait for it end then; see ``waitForEndOfInput()``).
    public func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    /// Waits until the process exits.
    public func wait() { process.waitUntilExit() }

    /// Ends the process (SIGTERM) and waits for it.
    public func terminate() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

extension JSONObject {
    /// The number at `key` as a `Double` (`nan` when absent), for reading role results.
    /// - Parameter key: the key.
    /// - Returns: the number.
    public func number(_ key: String) -> Double { self[key]?.doubleValue ?? .nan }

    /// The integer at `key` (`-1` when absent), for reading role results.
    /// - Parameter key: the key.
    /// - Returns: the integer.
    public func integer(_ key: String) -> Int { self[key]?.intValue ?? -1 }
}

/// CPU time, user plus system, of work this benchmark started.
public enum CPUTime {
    /// The CPU seconds of every child process this process has waited for (cumulative, so take the
    /// difference around a run); includes each child's start-up.
    public static var ofWaitedChildren: Double {
        #if os(Linux)
            var usage = rusage()
            guard getrusage(RUSAGE_CHILDREN.rawValue, &usage) == 0 else { return .nan }
            return seconds(usage.ru_utime) + seconds(usage.ru_stime)
        #else
            return .nan
        #endif
    }

    /// The CPU seconds process `pid` has used so far (Linux `/proc/<pid>/stat`); `nan` where it
    /// cannot be read.
    /// - Parameter pid: a running process.
    /// - Returns: its user plus system seconds.
    public static func ofProcess(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return .nan }
        // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    private static func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
}
