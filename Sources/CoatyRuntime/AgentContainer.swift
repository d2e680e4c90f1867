public import CoatyCommunication
import CoatyFilter
public import CoatyModel
import CoatySync
public import Logging
public import ServiceLifecycle
import Synchronization

/// Errors of the agent runtime.
public enum AgentRuntimeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``AgentContainer/run()`` was called a second time; a container runs once.
    case containerAlreadyRan
    /// Two controllers of a container have the same ``Controller/name``.
    case duplicateControllerName(String)
    /// ``CoatyLogPublisher/run()`` was called a second time; a publisher runs once.
    case logPublisherAlreadyRan
    /// A controller's `run()` was called a second time (the controller's name is given); a
    /// controller that tracks the network runs once.
    case controllerAlreadyRan(String)

    /// A message that says what to do.
    public var description: String {
        switch self {
        case .containerAlreadyRan:
            "This agent container has already run; create a new container (and communication manager) to run again."
        case .duplicateControllerName(let name):
            "Two controllers are named \"\(name)\"; give each controller a distinct `name` so its options can be found."
        case .logPublisherAlreadyRan:
            "This log publisher has already run; create a new one to publish again."
        case .controllerAlreadyRan(let name):
            "The controller \"\(name)\" has already run; create a new controller to run it again."
        }
    }
}

/// An agent: a communication manager and the controllers that use it, started and stopped
/// together (Coaty's container), as a `Service`.
///
/// ``run()`` calls every controller's ``Controller/onInit(_:)`` and
/// ``Controller/onCommunicationManagerStarting(_:)`` in registration order, starts the manager,
/// runs every controller's ``Controller/run(_:)`` concurrently, and on graceful shutdown (or
/// cancellation) cancels them, calls ``Controller/onCommunicationManagerStopping(_:)`` in reverse
/// order and stops the manager (which deadvertises the identity).
///
/// ```swift
/// let configuration = try AgentConfiguration.load(file: "agent.json")
/// let manager = try CommunicationManager.mqtt(configuration: configuration)
/// let agent = try AgentContainer(
///     communicationManager: manager,
///     controllers: [LightController(), ObjectLifecycleController(communicationManager: manager)],
///     controllerOptions: configuration.controllers
/// )
/// try await ServiceGroup(services: [agent], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
/// ```
public final class AgentContainer: Service, Sendable {
    /// The agent's communication manager.
    public let communicationManager: CommunicationManager
    /// The controllers, in registration order.
    public let controllers: [any Controller]
    /// The options of each controller by ``Controller/name``.
    public let controllerOptions: JSONObject
    /// The logger.
    public let logger: Logger

    private let hasRun = CoatyMutex(false)

    /// Creates a container; nothing happens until ``run()``.
    ///
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager (not started).
    ///   - controllers: the controllers, in the order their start hooks run.
    ///   - controllerOptions: each controller's options under its name, e.g.
    ///     ``AgentConfiguration/controllers``.
    ///   - logger: where the container and its controllers log.
    /// - Throws: ``AgentRuntimeError/duplicateControllerName(_:)`` when two controllers share a name.
    public init(
        communicationManager: CommunicationManager,
        controllers: [any Controller],
        controllerOptions: JSONObject = [:],
        logger: Logger = Logger(label: "coaty.agent", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(AgentRuntimeError) {
        var names: Set<String> = []
        for controller in controllers where !names.insert(controller.name).inserted {
            throw .duplicateControllerName(controller.name)
        }
        self.communicationManager = communicationManager
        self.controllers = controllers
        self.controllerOptions = controllerOptions
        self.logger = logger
    }

    /// The first controller of type `C`, if any (Coaty's `getController`).
    /// - Parameter type: the controller type.
    /// - Returns: the controller.
    public func controller<C: Controller>(_ type: C.Type) -> C? {
        controllers.lazy.compactMap { $0 as? C }.first
    }

    /// The context handed to `controller`'s hooks.
    /// - Parameter controller: a controller of this container.
    /// - Returns: its context.
    public func context(for controller: any Controller) -> ControllerContext {
        var logger = self.logger
        logger[metadataKey: "controller"] = "\(controller.name)"
        return ControllerContext(
            communicationManager: communicationManager,
            options: controllerOptions[controller.name]?.objectValue ?? [:],
            logger: logger
        )
    }

    /// Runs the agent until graceful shutdown or cancellation (see the type's description).
    ///
    /// - Throws: ``AgentRuntimeError/containerAlreadyRan`` on a second call; an error thrown by a
    ///   start hook (the manager is then not started, and the controllers whose starting hook
    ///   completed get their stopping hook); the manager's start error; the first error thrown by a
    ///   controller's ``Controller/run(_:)`` (after stopping).
    public func run() async throws {
        let first = hasRun.withLock { hasRun -> Bool in
            defer { hasRun = true }
            return !hasRun
        }
        guard first else { throw AgentRuntimeError.containerAlreadyRan }
        let contexts = controllers.map { (controller: $0, context: context(for: $0)) }
        for (controller, context) in contexts {
            try await controller.onInit(context)
        }
        var starting: [(controller: any Controller, context: ControllerContext)] = []
        do {
            for (controller, context) in contexts {
                try await controller.onCommunicationManagerStarting(context)
                starting.append((controller, context))
            }
            logger.debug("Starting the communication manager", metadata: ["controllers": "\(controllers.count)"])
            try await communicationManager.start()
        } catch {
            await stop(starting)
            throw error
        }
        do {
            try await runControllers(contexts)
        } catch {
            logger.error("A controller failed; stopping the agent", metadata: ["error": "\(error)"])
            await stop(contexts)
            throw error
        }
        await stop(contexts)
    }

    /// Runs the controllers' `run` hooks until graceful shutdown or cancellation, or until one throws.
    private func runControllers(_ contexts: [(controller: any Controller, context: ControllerContext)]) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                // Returns on graceful shutdown, throws when cancelled: either way it is time to stop.
                try? await gracefulShutdown()
                return true
            }
            for (controller, context) in contexts {
                group.addTask {
                    try await controller.run(context)
                    return false
                }
            }
            while let isShutdown = try await group.next() {
                if isShutdown { break }
            }
            group.cancelAll()
        }
    }

    private func stop(_ contexts: [(controller: any Controller, context: ControllerContext)]) async {
        for (controller, context) in contexts.reversed() {
            await controller.onCommunicationManagerStopping(context)
        }
        await communicationManager.stop()
        logger.debug("Stopped the agent")
    }
}
