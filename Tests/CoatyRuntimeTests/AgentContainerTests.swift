import CoatyCore
import CommunicationTestSupport
import CoatyTesting
import Logging
import ServiceLifecycle
import CoatySync
import Testing

/// What the recording controllers saw, in order.
final class HookLog: Sendable {
    let entries = CoatyMutex<[String]>([])
    let running: AsyncStream<String>
    let runningContinuation: AsyncStream<String>.Continuation

    init() {
        (running, runningContinuation) = AsyncStream<String>.makeStream()
    }

    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A controller that records its hooks with the manager's state at the time.
struct RecordingController: Controller {
    let name: String
    let log: HookLog
    var failsInRun = false
    var failsInStarting = false

    struct Failure: Error {}

    private func record(_ hook: String, _ context: ControllerContext) {
        log.append("\(name).\(hook).\(context.communicationManager.communicationState)")
    }

    func onInit(_ context: ControllerContext) async throws {
        record("init", context)
        if let option = context.options["option"] { log.append("\(name).option=\(option)") }
    }

    func onCommunicationManagerStarting(_ context: ControllerContext) async throws {
        record("starting", context)
        if failsInStarting { throw Failure() }
    }

    func run(_ context: ControllerContext) async throws {
        record("run", context)
        log.runningContinuation.yield(name)
        if failsInRun { throw Failure() }
        // Work until cancelled by the container's shutdown.
        try await Task.sleep(for: .seconds(3600))
    }

    func onCommunicationManagerStopping(_ context: ControllerContext) async { record("stopping", context) }
}

/// Runs a container of `first` and a controller named "failing" that fails where `failure` says,
/// expecting the failure to come out of `run()`.
private func runFailingAgent(
    _ first: RecordingController,
    failing failure: WritableKeyPath<RecordingController, Bool>
) async throws -> (InProcessBroker, TestAgent, HookLog, AgentContainer) {
    let broker = InProcessBroker()
    let agent = try TestAgent(broker)
    let log = first.log
    var failing = RecordingController(name: "failing", log: log)
    failing[keyPath: failure] = true
    let container = try AgentContainer(communicationManager: agent.manager, controllers: [first, failing])
    await #expect(throws: RecordingController.Failure.self) { try await container.run() }
    return (broker, agent, log, container)
}

@Suite("AgentContainer on the in-process broker", .timeLimit(.minutes(1)))
struct AgentContainerTests {
    @Test("hooks run in order: init and starting in registration order, run while online, stopping in reverse")
    func hookOrder() async throws {
        let broker = InProcessBroker()
        let agent = try TestAgent(broker)
        let log = HookLog()
        let container = try AgentContainer(
            communicationManager: agent.manager,
            controllers: [RecordingController(name: "first", log: log), RecordingController(name: "second", log: log)],
            controllerOptions: ["second": ["option": 7]]
        )
        #expect(container.controller(RecordingController.self)?.name == "first")
        #expect(container.controller(ObjectLifecycleController.self) == nil)
        let group = ServiceGroup(services: [container], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        var started = log.running.makeAsyncIterator()
        let runningNames = [await started.next(), await started.next()].compactMap { $0 }
        #expect(Set(runningNames) == ["first", "second"])
        await group.triggerGracefulShutdown()
        try await running.value

        let entries = log.all
        #expect(
            Array(entries.prefix(5)) == [
                "first.init.offline", "second.init.offline", "second.option=7",
                "first.starting.offline", "second.starting.offline",
            ]
        )
        #expect(Set(entries[5..<7]) == ["first.run.online", "second.run.online"])
        #expect(Array(entries.suffix(2)) == ["second.stopping.online", "first.stopping.online"])
        #expect(entries.count == 9)
        #expect(agent.manager.communicationState == .offline)
        #expect(agent.publishedTopics(broker).last == "coaty/3/-/DAD/\(agent.id)")
    }

    @Test("a failing controller stops the agent and its error comes out of run()")
    func failingControllerStopsAgent() async throws {
        let (_, agent, log, container) = try await runFailingAgent(
            RecordingController(name: "steady", log: HookLog()),
            failing: \.failsInRun
        )
        #expect(Array(log.all.suffix(2)) == ["failing.stopping.online", "steady.stopping.online"])
        #expect(agent.manager.communicationState == .offline)
        await #expect(throws: AgentRuntimeError.containerAlreadyRan) { try await container.run() }
    }

    @Test("a failing starting hook keeps the manager from starting; controllers started before are stopped")
    func failingStartingHook() async throws {
        let (broker, agent, log, _) = try await runFailingAgent(
            RecordingController(name: "started", log: HookLog()),
            failing: \.failsInStarting
        )
        #expect(
            log.all == [
                "started.init.offline", "failing.init.offline", "started.starting.offline",
                "failing.starting.offline", "started.stopping.offline",
            ]
        )
        #expect(agent.publishedTopics(broker).isEmpty)
        #expect(!broker.connectedClientIds.contains(agent.clientId))
    }

    @Test("controller names must be distinct")
    func duplicateNames() throws {
        let broker = InProcessBroker()
        let agent = try TestAgent(broker)
        let log = HookLog()
        #expect(throws: AgentRuntimeError.duplicateControllerName("same")) {
            try AgentContainer(
                communicationManager: agent.manager,
                controllers: [RecordingController(name: "same", log: log), RecordingController(name: "same", log: log)]
            )
        }
    }
}
