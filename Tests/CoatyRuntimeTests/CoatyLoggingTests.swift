import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import Logging
import ServiceLifecycle
import CoatySync
import Testing

/// Starts an agent on a fresh broker with a subscribed observation of Log objects.
private func startAgentObservingLogs(
    name: String = "agent"
) async throws -> (TestAgent, EventObservation<AdvertiseEvent<AnyCoatyObject>>) {
    let agent = try TestAgent(InProcessBroker(), name: name)
    try await agent.manager.start()
    let logs = try agent.manager.observeAdvertise(coreType: .log)
    await logs.subscribed()
    return (agent, logs)
}

@Suite("Decentralized logging through Log objects", .timeLimit(.minutes(1)))
struct CoatyLoggingTests {
    @Test(
        "swift-log levels map onto Coaty's",
        arguments: [
            (Logger.Level.trace, LogLevel.debug), (.debug, .debug), (.info, .info), (.notice, .info),
            (.warning, .warning), (.error, .error), (.critical, .fatal),
        ]
    )
    func levelMapping(swiftLevel: Logger.Level, coatyLevel: LogLevel) {
        #expect(LogLevel(swiftLevel) == coatyLevel)
    }

    @Test("publishLog advertises a Log object that log observers receive")
    func publishLog() async throws {
        let (agent, logs) = try await startAgentObservingLogs(name: "logger")
        var received = logs.makeAsyncIterator()
        let sent = try await agent.manager.publishLog(
            .warning,
            "Battery low",
            tags: ["power"],
            host: LogHost(pid: 42, hostname: "box")
        )
        let event = try #require(await received.next())
        let log = try #require(event.object.as(Log.self))
        #expect(log == sent)
        #expect(event.object.json["logLevel"] == 30)
        #expect(log.logMessage == "Battery low")
        #expect(log.name == "logger")
        #expect(log.parentObjectId == agent.id)
        #expect(log.logHost?.hostname == "box")
        await agent.manager.stop()
    }

    @Test("the log handler publishes Log objects at or above its level, with the mapped levels and metadata")
    func handlerPublishes() async throws {
        let (agent, logs) = try await startAgentObservingLogs()
        var received = logs.makeAsyncIterator()

        let publisher = CoatyLogPublisher(communicationManager: agent.manager, tags: ["test"])
        var logger = Logger(label: "com.example.light") { publisher.makeLogHandler(label: $0, logLevel: .info) }
        logger[metadataKey: "room"] = "kitchen"
        let running = Task { try await publisher.run() }

        logger.debug("not published")
        logger.info("switched on", metadata: ["lux": "300"])
        logger.notice("noticed")
        logger.warning("flickering")
        logger.error("broken")
        logger.critical("on fire")
        var levels: [LogLevel] = []
        var messages: [String] = []
        for _ in 0..<5 {
            let log = try #require(await received.next()?.object.as(Log.self))
            levels.append(log.logLevel)
            messages.append(log.logMessage)
            #expect(log.name == "com.example.light")
            #expect(log.logTags == ["test"])
            #expect(log.parentObjectId == agent.id)
            #expect(log.logLabels?["room"] == "kitchen")
        }
        #expect(levels == [.info, .info, .warning, .error, .fatal])
        #expect(messages == ["switched on", "noticed", "flickering", "broken", "on fire"])
        running.cancel()
        _ = try? await running.value
        #expect(publisher.statistics.published == 5)
        #expect(publisher.statistics.dropped == 0)
        await agent.manager.stop()
    }

    @Test("logging never blocks: beyond the buffer the oldest entries are dropped and counted")
    func neverBlocks() async throws {
        let (agent, logs) = try await startAgentObservingLogs()
        var received = logs.makeAsyncIterator()

        // Nobody publishes yet: every call must still return at once.
        let publisher = CoatyLogPublisher(communicationManager: agent.manager, bufferLimit: 10)
        let logger = Logger(label: "flood") { publisher.makeLogHandler(label: $0, logLevel: .trace) }
        for index in 0..<100 { logger.info("message \(index)") }
        #expect(publisher.statistics.dropped == 90)

        let group = ServiceGroup(services: [publisher], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        var messages: [String] = []
        for _ in 0..<10 {
            messages.append(try #require(await received.next()?.object.as(Log.self)).logMessage)
        }
        #expect(messages == (90..<100).map { "message \($0)" })
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(publisher.statistics.published == 10)
        await agent.manager.stop()
    }

    @Test("messages logged while publishing a Log object are not published (no recursion)")
    func noRecursion() async throws {
        let broker = InProcessBroker()
        // The manager logs through the same publisher. It is offline with room for one deferred
        // publication, so each further Log object makes it log "dropped the oldest".
        let late = LateLogHandler()
        let identity = Identity(name: "recursive")
        let manager = try CommunicationManager(
            transport: broker.makeTransport(clientId: CoatyConnection.clientId(identityId: identity.objectId)),
            identity: identity,
            options: .init(deferredPublicationLimit: 1),
            logger: Logger(label: "coaty.communication") { _ in late }
        )
        let publisher = CoatyLogPublisher(communicationManager: manager)
        late.box.handler.withLock { $0 = publisher.makeLogHandler(label: "coaty.communication", logLevel: .trace) }
        let logger = Logger(label: "app") { publisher.makeLogHandler(label: $0, logLevel: .trace) }
        for index in 0..<3 { logger.warning("message \(index)") }

        let group = ServiceGroup(services: [publisher], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        let statistics = publisher.statistics
        #expect(statistics.published == 3)
        #expect(statistics.suppressed == 2)
        #expect(manager.statistics.deferredOverflow == 2)
        #expect(manager.statistics.deferredPending == 1)
    }
}

/// A log handler whose target is set after the logger is made (the manager needs a logger before
/// the publisher that needs the manager exists).
struct LateLogHandler: LogHandler {
    final class Target: Sendable {
        let handler = CoatyMutex<CoatyLogHandler?>(nil)
    }

    let box = Target()
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        box.handler.withLock { $0 }?.log(event: event)
    }
}
