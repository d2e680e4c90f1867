public import InMemoryTracing
import Tracing

extension InMemoryTracer {
    /// The first finished span named `name`, waiting up to 10 s for it (spans of requests end on other tasks);
    /// `nil` when none finished in time.
    public func finishedSpan(named name: String) async -> FinishedInMemorySpan? {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let span = finishedSpans.first(where: { $0.operationName == name }) { return span }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return finishedSpans.first { $0.operationName == name }
    }
}

extension FinishedInMemorySpan {
    /// A string attribute, or `nil`.
    public func string(_ key: String) -> String? {
        guard case .string(let value) = attributes[key]?.toSpanAttribute() else { return nil }
        return value
    }

    /// An integer attribute, or `nil`.
    public func int(_ key: String) -> Int64? {
        guard case .int64(let value) = attributes[key]?.toSpanAttribute() else { return nil }
        return value
    }
}
