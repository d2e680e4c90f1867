public import CoatyCommunication
import CoatyFilter
public import CoatyModel
import CoatySync
import Foundation
public import Logging
public import ServiceLifecycle
import Synchronization

extension LogLevel {
    /// The Coaty level of a swift-log level: trace and debug → debug, info and notice → info,
    /// warning → warning, error → error, critical → fatal.
    /// - Parameter level: the swift-log level.
    public init(_ level: Logger.Level) {
        switch level {
        case .trace, .debug: self = .debug
        case .info, .notice: self = .info
        case .warning: self = .warning
        case .error: self = .error
        case .critical: self = .fatal
        }
    }
}

extension LogHost {
    /// Host information of this process: its id and the host name.
    /// - Parameter agentInfo: package, build and configuration information to add, if any.
    /// - Returns: the host information.
    public static func currentProcess(agentInfo: JSONValue? = nil) -> LogHost {
        let process = ProcessInfo.processInfo
        return LogHost(agentInfo: agentInfo, pid: Double(process.processIdentifier), hostname: process.hostName)
    }
}

extension CommunicationManager {
    /// Advertises a Log object (Coaty's decentralized logging); observe logs with
    /// `observeAdvertise(coreType: .log)`.
    ///
    /// ```swift
    /// try await manager.publishLog(.warning, "Battery low", tags: ["power"])
    /// ```
    ///
    /// - Parameters:
    ///   - level: the level.
    ///   - message: the message.
    ///   - tags: tags to categorize it.
    ///   - labels: labels as key-value pairs.
    ///   - host: information about this host (Coaty sends it with the first log of an agent).
    ///   - name: the Log object's name; the identity's name by default.
    /// - Returns: the Log object advertised (its `parentObjectId` is the identity's objectId).
    /// - Throws: ``CommunicationError`` when publishing fails permanently.
    @discardableResult
    public func publishLog(
        _ level: LogLevel,
        _ message: String,
        tags: [String]? = nil,
        labels: JSONObject? = nil,
        host: LogHost? = nil,
        name: String? = nil
    ) async throws(CommunicationError) -> Log {
        let log = Log(
            name: name ?? identity.name,
            logLevel: level,
            logMessage: message,
            logDate: Log.currentISODate(),
            logTags: tags,
            logLabels: labels,
            logHost: host,
            parentObjectId: identity.objectId
        )
        try await publishAdvertise(log)
        return log
    }
}

/// Publishes swift-log messages as Coaty Log objects, without ever blocking the code that logs.
///
/// Make handlers with ``makeLogHandler(label:logLevel:)`` (e.g. in `LoggingSystem.bootstrap`,
/// beside a console handler with `MultiplexLogHandler`) and run the publisher as a `Service`
/// beside the agent. A handler only puts the Log object in a bounded buffer; ``run()`` advertises
/// them. When the buffer is full the **oldest** entry is dropped and counted in
/// ``Statistics/dropped``. Messages logged while a Log object is being published (e.g. by the
/// communication manager or its transport, in the publishing task or tasks it starts) are never
/// published, so logging cannot feed on itself; they are counted in ``Statistics/suppressed``.
///
/// ```swift
/// let publisher = CoatyLogPublisher(communicationManager: manager, host: .currentProcess())
/// let logger = Logger(label: "com.example.light") { publisher.makeLogHandler(label: $0, logLevel: .warning) }
/// try await ServiceGroup(services: [agent, publisher], logger: consoleLogger).run()
/// ```
///
/// On graceful shutdown the buffered Log objects are published before ``run()`` returns (place
/// the publisher after the agent in a `ServiceGroup`, so it stops first); on cancellation they
/// are dropped.
public final class CoatyLogPublisher: Service, Sendable {
    /// What the publisher did so far.
    public struct Statistics: Sendable, Hashable {
        /// Log objects advertised.
        public var published = 0
        /// Log objects dropped because the buffer was full or the publisher had finished.
        public var dropped = 0
        /// Messages not published because they were logged while publishing a Log object.
        public var suppressed = 0
        /// Log objects the communication manager refused (e.g. a permanent transport failure).
        public var failed = 0
    }

    /// The communication manager that advertises the Log objects.
    public let communicationManager: CommunicationManager
    /// The most Log objects waiting to be published.
    public let bufferLimit: Int
    /// Host information sent with every Log object, if any.
    public let host: LogHost?
    /// Tags added to every Log object, if any.
    public let tags: [String]?

    private let stream: AsyncStream<Log>
    private let continuation: AsyncStream<Log>.Continuation
    private let counters = CoatyMutex(Statistics())
    private let hasRun = CoatyMutex(false)

    /// Creates a publisher; it publishes while ``run()`` runs.
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager.
    ///   - bufferLimit: the most Log objects waiting to be published (at least 1).
    ///   - host: host information for every Log object, e.g. ``LogHost/currentProcess(agentInfo:)``.
    ///   - tags: tags for every Log object.
    public init(
        communicationManager: CommunicationManager,
        bufferLimit: Int = 1000,
        host: LogHost? = nil,
        tags: [String]? = nil
    ) {
        self.communicationManager = communicationManager
        self.bufferLimit = max(1, bufferLimit)
        self.host = host
        self.tags = tags
        (stream, continuation) = AsyncStream<Log>.makeStream(bufferingPolicy: .bufferingNewest(max(1, bufferLimit)))
    }

    /// A snapshot of the counters.
    public var statistics: Statistics { counters.withLock { $0 } }

    /// A swift-log handler that hands messages at or above `logLevel` to this publisher.
    /// - Parameters:
    ///   - label: the logger's label; it becomes the Log object's name.
    ///   - logLevel: the lowest level published.
    /// - Returns: the handler.
    public func makeLogHandler(label: String, logLevel: Logger.Level = .info) -> CoatyLogHandler {
        CoatyLogHandler(label: label, logLevel: logLevel, publisher: self)
    }

    /// Puts a Log object in the buffer, unless it comes from publishing one.
    func enqueue(_ makeLog: () -> Log) {
        guard !LogPublishing.isActive else {
            counters.withLock { $0.suppressed += 1 }
            return
        }
        switch continuation.yield(makeLog()) {
        case .enqueued: break
        case .dropped, .terminated: counters.withLock { $0.dropped += 1 }
        @unknown default: break
        }
    }

    /// Advertises buffered Log objects until graceful shutdown (then publishes what is left) or
    /// cancellation.
    /// - Throws: ``AgentRuntimeError/logPublisherAlreadyRan`` on a second call.
    public func run() async throws {
        let first = hasRun.withLock { hasRun -> Bool in
            defer { hasRun = true }
            return !hasRun
        }
        guard first else { throw AgentRuntimeError.logPublisherAlreadyRan }
        let continuation = self.continuation
        await LogPublishing.$isActive.withValue(true) {
            await withGracefulShutdownHandler {
                for await log in stream {
                    do {
                        try await communicationManager.publishAdvertise(log)
                        counters.withLock { $0.published += 1 }
                    } catch {
                        counters.withLock { $0.failed += 1 }
                    }
                }
            } onGracefulShutdown: {
                continuation.finish()
            }
        }
    }
}

/// Whether the current task is publishing Log objects (so its own logging is not published).
enum LogPublishing {
    @TaskLocal static var isActive = false
}

/// A swift-log handler that turns each message into a Coaty Log object for a
/// ``CoatyLogPublisher``; it never blocks and never publishes what publishing logs.
///
/// The Log object's name is the logger's label, its `logLevel` the mapped level (see
/// ``LogLevel/init(_:)``), its `logLabels` the merged metadata as strings, arrays and objects,
/// its `parentObjectId` the agent's identity.
public struct CoatyLogHandler: LogHandler {
    /// The logger's label.
    public let label: String
    /// The lowest level handed to the publisher.
    public var logLevel: Logger.Level
    /// The handler's metadata.
    public var metadata: Logger.Metadata = [:]
    /// The metadata provider, if any.
    public var metadataProvider: Logger.MetadataProvider?
    /// The publisher.
    public let publisher: CoatyLogPublisher

    /// Creates a handler; ``CoatyLogPublisher/makeLogHandler(label:logLevel:)`` is the usual way.
    /// - Parameters:
    ///   - label: the logger's label.
    ///   - logLevel: the lowest level handed on.
    ///   - publisher: the publisher.
    public init(label: String, logLevel: Logger.Level = .info, publisher: CoatyLogPublisher) {
        self.label = label
        self.logLevel = logLevel
        self.publisher = publisher
    }

    /// A metadata value of the handler.
    /// - Parameter key: the key.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Hands the message to the publisher as a Log object.
    /// - Parameter event: the message.
    public func log(event: LogEvent) {
        publisher.enqueue {
            var merged = metadata
            if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
            if let given = event.metadata { merged.merge(given) { _, new in new } }
            var labels = JSONObject()
            for (key, value) in merged.sorted(by: { $0.key < $1.key }) { labels[key] = Self.json(value) }
            let manager = publisher.communicationManager
            return Log(
                name: label,
                logLevel: LogLevel(event.level),
                logMessage: event.message.description,
                logDate: Log.currentISODate(),
                logTags: publisher.tags,
                logLabels: labels.isEmpty ? nil : labels,
                logHost: publisher.host,
                parentObjectId: manager.identity.objectId
            )
        }
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let string): .string(string)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let dictionary):
            .object(JSONObject(dictionary.sorted(by: { $0.key < $1.key }).map { ($0.key, json($0.value)) }))
        }
    }
}
