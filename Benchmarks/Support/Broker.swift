public import CoatyTesting

/// Runs `body` against a `mosquitto` this benchmark starts on a free loopback port with the
/// pinned configuration of ``CoatyTesting/MosquittoBroker``, and stops it afterwards (also on error).
/// - Parameters:
///   - additionalConfiguration: lines appended to the pinned configuration, e.g. `set_tcp_nodelay true`.
///   - isolation: the caller's isolation.
///   - body: the measurements.
/// - Returns: what `body` returns.
/// - Throws: when the broker cannot start, or what `body` throws.
public func withBroker<T>(
    additionalConfiguration: [String] = [],
    isolation: isolated (any Actor)? = #isolation,
    _ body: (MosquittoBroker) async throws -> T
) async throws -> T {
    let broker = try MosquittoBroker(additionalConfiguration: additionalConfiguration)
    try await broker.start()
    let result: Result<T, any Error>
    do {
        result = .success(try await body(broker))
    } catch {
        result = .failure(error)
    }
    await broker.stop()
    return try result.get()
}
