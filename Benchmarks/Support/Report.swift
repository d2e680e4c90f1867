public import CoatyCore
import Foundation

/// One scenario's result: ours, the baseline measured in the same run, and their ratio.
public struct BenchmarkRow: Sendable {
    /// Which direction is better.
    public enum Better: String, Sendable {
        /// A rate: higher is better.
        case higher
        /// A latency: lower is better.
        case lower
    }

    /// The scenario, with its unit, e.g. `throughput 300 B QoS 0 (msg/s)`.
    public var scenario: String
    /// Which direction is better.
    public var better: Better
    /// Our figure.
    public var ours: Double
    /// The baseline's figure, or `nil` for a scenario without one.
    public var baseline: Double?
    /// The target ratio ours/baseline (at least it when higher is better, at most when lower is).
    public var target: Double?
    /// Decimal places in the table.
    public var decimals: Int

    /// A row.
    /// - Parameters:
    ///   - scenario: the scenario with its unit.
    ///   - better: which direction is better.
    ///   - ours: our figure.
    ///   - baseline: the baseline's figure.
    ///   - target: the target ratio, if any.
    ///   - decimals: decimal places in the table.
    public init(
        _ scenario: String,
        better: Better,
        ours: Double,
        baseline: Double?,
        target: Double? = nil,
        decimals: Int = 1
    ) {
        self.scenario = scenario
        self.better = better
        self.ours = ours
        self.baseline = baseline
        self.target = target
        self.decimals = decimals
    }

    /// ours / baseline.
    public var ratio: Double? { baseline.map { ours / $0 } }

    /// Whether the ratio meets the target (`nil` without a target).
    public var targetMet: Bool? {
        guard let target, let ratio else { return nil }
        return better == .higher ? ratio >= target : ratio <= target
    }

    var json: JSONValue {
        var entry: JSONObject = [
            "scenario": .string(scenario), "better": .string(better.rawValue), "ours": .double(ours),
        ]
        if let baseline { entry["baseline"] = .double(baseline) }
        if let ratio { entry["ratio"] = .double((ratio * 1000).rounded() / 1000) }
        if let target { entry["target"] = .double(target) }
        if let targetMet { entry["targetMet"] = .bool(targetMet) }
        return .object(entry)
    }
}

/// A benchmark's results as a Markdown table (ours, baseline, ratio, target) or one JSON object.
public struct BenchmarkReport: Sendable {
    /// The first line of the table form.
    public var title: String
    /// The baseline column's header, e.g. `baseline (C)`.
    public var baselineHeader: String
    /// The run's parameters (top-level members of the JSON form).
    public var parameters: JSONObject
    /// The results.
    public var rows: [BenchmarkRow]
    /// Further details: printed as `key: value` lines after the table, and under `details` in JSON.
    public var details: JSONObject
    /// Lines printed after the table (what was checked, how to read it).
    public var notes: [String]

    /// A report.
    /// - Parameters:
    ///   - title: the first line.
    ///   - baselineHeader: the baseline column's header.
    ///   - parameters: the run's parameters.
    ///   - rows: the results.
    ///   - details: further details.
    ///   - notes: lines after the table.
    public init(
        title: String,
        baselineHeader: String = "baseline",
        parameters: JSONObject,
        rows: [BenchmarkRow],
        details: JSONObject = [:],
        notes: [String] = []
    ) {
        self.title = title
        self.baselineHeader = baselineHeader
        self.parameters = parameters
        self.rows = rows
        self.details = details
        self.notes = notes
    }

    /// Prints the report to standard output.
    /// - Parameter json: one JSON object instead of the table.
    public func print(json: Bool) {
        if json {
            var document = parameters
            document["results"] = .array(rows.map(\.json))
            if !details.isEmpty { document["details"] = .object(details) }
            Swift.print(JSONValue.object(document).serializedString())
            return
        }
        let withTargets = rows.contains { $0.target != nil }
        Swift.print(title)
        Swift.print("| scenario | ours | \(baselineHeader) | ratio ours/baseline |\(withTargets ? " target |" : "")")
        Swift.print("|---|---:|---:|---:|\(withTargets ? "---|" : "")")
        for row in rows {
            let format = "%.\(row.decimals)f"
            var line = "| \(row.scenario) | \(String(format: format, row.ours)) | "
            line += row.baseline.map { String(format: format, $0) } ?? "-"
            line += " | " + (row.ratio.map { String(format: "%.2f", $0) } ?? "-") + " |"
            if withTargets {
                if let target = row.target, let met = row.targetMet {
                    line +=
                        " \(row.better == .higher ? "≥" : "≤") \(String(format: "%.2f", target)) \(met ? "met" : "NOT met") |"
                } else {
                    line += " - |"
                }
            }
            Swift.print(line)
        }
        for (key, value) in details { Swift.print("\(key): \(value.serializedString())") }
        for note in notes { Swift.print(note) }
    }
}

/// A benchmark's command-line options: `--json` and integer options with defaults.
public struct BenchmarkOptions: Sendable {
    /// Whether to print JSON.
    public var json = false
    /// `--instructions`: count instructions and allocations (callgrind) instead of timing.
    public var instructions = false
    private var values: [String: Int]
    private let names: [String]

    /// Parses the arguments.
    /// - Parameters:
    ///   - arguments: the arguments after the program name.
    ///   - defaults: every integer option with its default, e.g. `["--messages": 200_000]`.
    /// - Throws: ``BenchmarkError`` for an unknown option or a value that is not an integer.
    public init(_ arguments: ArraySlice<String>, defaults: KeyValuePairs<String, Int>) throws {
        names = defaults.map { $0.key }
        values = Dictionary(uniqueKeysWithValues: defaults.map { ($0.key, $0.value) })
        var it = arguments.makeIterator()
        while let argument = it.next() {
            if argument == "--json" {
                json = true
            } else if argument == "--instructions" {
                instructions = true
            } else if values[argument] != nil {
                guard let value = it.next().flatMap({ Int($0.replacingOccurrences(of: "_", with: "")) }) else {
                    throw BenchmarkError("\(argument) needs an integer")
                }
                values[argument] = value
            } else {
                throw BenchmarkError(
                    "unknown option \(argument) (options: --json --instructions \(names.map { "\($0) N" }.joined(separator: " ")))"
                )
            }
        }
    }

    /// The value of an integer option.
    /// - Parameter name: the option, e.g. `--messages`.
    public subscript(name: String) -> Int { values[name] ?? 0 }

    /// The integer options as JSON members named in camel case (`--round-trips` → `roundTrips`),
    /// the report's parameters.
    public var parameters: JSONObject {
        JSONObject(
            names.map { name in
                let words = name.split(separator: "-")
                let key = words.enumerated().map { $0.offset == 0 ? String($0.element) : $0.element.capitalized }
                    .joined()
                return (key, JSONValue.int(Int64(values[name] ?? 0)))
            }
        )
    }
}
