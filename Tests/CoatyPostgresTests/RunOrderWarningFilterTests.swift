import Logging
import CoatySync
import Testing

@testable import CoatyPostgres

/// Records the messages it is given (level and message, as "warning Connection lost").
struct RecordingHandler: LogHandler {
    let recorded: Recorded
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { recorded.messages.withLock { $0.append("\(event.level) \(event.message)") } }
}

/// The messages one or more ``RecordingHandler``s were given, in order.
final class Recorded: Sendable {
    let messages = CoatyMutex<[String]>([])
}

@Suite("PostgreSQL client log filter")
struct RunOrderWarningFilterTests {
    /// The pool's "leased before run()" warning (noise: `run()` and the first lease start together)
    /// is dropped; every other message passes, with the level and metadata of the wrapped handler.
    @Test func dropsOnlyTheRunOrderWarning() {
        let recorded = Recorded()
        var logger = Logger(label: "test") { _ in RecordingHandler(recorded: recorded) }
        logger.handler = RunOrderWarningFilter(base: logger.handler)
        logger.logLevel = .info
        logger[metadataKey: "k"] = "v"
        logger.warning(
            "Trying to lease connection from `PostgresClient`, but `PostgresClient.run()` hasn't been called yet."
        )
        logger.warning("Connection to the server failed")
        logger.error("`PostgresClient.run()` hasn't been called yet")  // not the warning: passes
        logger.debug("below the level")
        #expect(
            recorded.messages.withLock { $0 } == [
                "warning Connection to the server failed", "error `PostgresClient.run()` hasn't been called yet",
            ]
        )
        #expect(logger.logLevel == .info)
        #expect(logger[metadataKey: "k"] == "v")
    }
}
