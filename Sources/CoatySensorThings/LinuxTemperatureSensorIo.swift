public import CoatyCore
import Foundation

/// A temperature input the Linux kernel exposes in sysfs, read by ``LinuxTemperatureSensorIo``.
public struct TemperatureInput: Sendable, Hashable, CustomStringConvertible {
    /// Where the kernel exposes the input.
    public enum Kind: String, Sendable, Hashable {
        /// A hardware monitoring chip: `/sys/class/hwmon/hwmon*/temp*_input`.
        case hwmon
        /// A thermal zone: `/sys/class/thermal/thermal_zone*/temp`.
        case thermalZone
    }

    /// The file holding the temperature in millidegrees Celsius.
    public var path: String
    /// Where the kernel exposes the input.
    public var kind: Kind
    /// A readable name: the chip's `name` and the input's `temp*_label` (or file name) for
    /// hwmon, the zone's `type` for a thermal zone.
    public var label: String

    /// Describes an input.
    /// - Parameters:
    ///   - path: the file holding millidegrees Celsius.
    ///   - kind: where the kernel exposes it.
    ///   - label: a readable name.
    public init(path: String, kind: Kind, label: String) {
        self.path = path
        self.kind = kind
        self.label = label
    }

    /// The label and the path.
    public var description: String { "\(label) (\(path))" }
}

/// Reads a temperature in degrees Celsius from Linux sysfs: a hardware monitoring input
/// (`/sys/class/hwmon/hwmon*/temp*_input`) or a thermal zone (`/sys/class/thermal/thermal_zone*/temp`),
/// both in millidegrees.
///
/// ```swift
/// let io = try LinuxTemperatureSensorIo()          // the first input found
/// let celsius = try io.readCelsius()               // e.g. 47.5
/// ```
///
/// Reads are small synchronous file reads. Pass another `root` to read a copy of the sysfs
/// tree (tests do). Elsewhere than on Linux no input is found.
public struct LinuxTemperatureSensorIo: SensorIo {
    /// The patterns searched, below the root.
    public static let searchedPatterns = [
        "sys/class/hwmon/hwmon*/temp*_input", "sys/class/thermal/thermal_zone*/temp",
    ]

    /// The input read.
    public let input: TemperatureInput

    /// An IO reading `input`.
    /// - Parameter input: the input, e.g. one of ``availableInputs(root:)``.
    public init(input: TemperatureInput) {
        self.input = input
    }

    /// An IO reading the first input found (hwmon inputs first, then thermal zones, each in
    /// numeric order) that `isIncluded` accepts.
    /// - Parameters:
    ///   - root: the directory holding `sys`; `/` by default.
    ///   - isIncluded: which inputs to consider; all by default.
    /// - Throws: ``SensorIoError/noTemperatureSensor(searched:)`` when there is none.
    public init(root: String = "/", where isIncluded: (TemperatureInput) -> Bool = { _ in true })
        throws(SensorIoError)
    {
        guard let input = Self.availableInputs(root: root).first(where: isIncluded) else {
            throw .noTemperatureSensor(searched: Self.searchedPatterns.map { Self.join(root, $0) })
        }
        self.init(input: input)
    }

    /// Every temperature input below `root`: hwmon inputs first, then thermal zones, each in
    /// numeric order (`hwmon2` before `hwmon10`).
    /// - Parameter root: the directory holding `sys`; `/` by default.
    /// - Returns: the inputs; empty when there are none.
    public static func availableInputs(root: String = "/") -> [TemperatureInput] {
        var inputs: [TemperatureInput] = []
        let hwmon = join(root, "sys/class/hwmon")
        for chip in numbered(in: hwmon, prefix: "hwmon", suffix: "") {
            let directory = join(hwmon, chip)
            let name = readLine(join(directory, "name")) ?? chip
            for file in numbered(in: directory, prefix: "temp", suffix: "_input") {
                let base = String(file.dropLast("_input".count))
                let label = readLine(join(directory, base + "_label")) ?? base
                inputs.append(TemperatureInput(path: join(directory, file), kind: .hwmon, label: "\(name) \(label)"))
            }
        }
        let thermal = join(root, "sys/class/thermal")
        for zone in numbered(in: thermal, prefix: "thermal_zone", suffix: "") {
            let directory = join(thermal, zone)
            let path = join(directory, "temp")
            guard FileManager.default.fileExists(atPath: path) else { continue }
            inputs.append(
                TemperatureInput(path: path, kind: .thermalZone, label: readLine(join(directory, "type")) ?? zone)
            )
        }
        return inputs
    }

    /// Reads the temperature.
    /// - Returns: degrees Celsius (the file's millidegrees / 1000).
    /// - Throws: ``SensorIoError/unreadable(path:reason:)`` when the file cannot be read or
    ///   does not hold an integer.
    public func readCelsius() throws(SensorIoError) -> Double {
        let text: String
        do {
            text = try Self.readText(input.path)
        } catch let error as SensorIoError {
            throw error
        } catch {
            throw .unreadable(path: input.path, reason: "\(error)")
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let millidegrees = Int(trimmed) else {
            throw .unreadable(path: input.path, reason: "expected millidegrees Celsius, found \"\(trimmed)\"")
        }
        return Double(millidegrees) / 1000
    }

    /// Reads the temperature as a number of degrees Celsius.
    /// - Returns: the temperature.
    /// - Throws: ``SensorIoError/unreadable(path:reason:)``.
    public func read() async throws -> JSONValue {
        .double(try readCelsius())
    }

    /// The entries `<prefix><number><suffix>` of a directory, in numeric order.
    private static func numbered(in directory: String, prefix: String, suffix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let numbered = names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix(prefix), name.hasSuffix(suffix), name.count > prefix.count + suffix.count,
                let number = Int(name.dropFirst(prefix.count).dropLast(suffix.count))
            else { return nil }
            return (number, name)
        }
        return numbered.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Reads a whole file until its end (sysfs files report a size that is not theirs).
    private static func readText(_ path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw SensorIoError.unreadable(path: path, reason: "the file cannot be opened")
        }
        defer { try? handle.close() }
        return String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
    }

    private static func readLine(_ path: String) -> String? {
        guard let line = try? readText(path).trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        return line.isEmpty ? nil : line
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
