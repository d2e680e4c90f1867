public import CoatyCommunication
import CoatyFilter
public import CoatyModel
public import Logging

/// What a ``Controller`` gets in its hooks: the agent's communication manager, its own options
/// from the agent configuration, and a logger.
public struct ControllerContext: Sendable {
    /// The agent's communication manager.
    public let communicationManager: CommunicationManager
    /// The controller's options: the member named ``Controller/name`` of
    /// ``AgentConfiguration/controllers``, or an empty object.
    public let options: JSONObject
    /// The container's logger with the metadata `controller` set to the controller's name.
    public let logger: Logger

    /// Creates a context.
    /// - Parameters:
    ///   - communicationManager: the agent's communication manager.
    ///   - options: the controller's options.
    ///   - logger: the logger.
    public init(communicationManager: CommunicationManager, options: JSONObject = [:], logger: Logger) {
        self.communicationManager = communicationManager
        self.options = options
        self.logger = logger
    }

    /// The agent's identity.
    public var identity: Identity { communicationManager.identity }
}

/// A unit of agent behaviour with lifecycle hooks, run by an ``AgentContainer`` (Coaty's controller).
///
/// Every hook has a default that does nothing, so a controller implements only what it needs.
/// The container calls, in registration order, ``onInit(_:)`` once and
/// ``onCommunicationManagerStarting(_:)`` before it starts the communication manager; then
/// runs every controller's ``run(_:)`` concurrently until shutdown; then, in reverse order,
/// ``onCommunicationManagerStopping(_:)`` before it stops the manager.
///
/// ```swift
/// struct LightController: Controller {
///     func run(_ context: ControllerContext) async throws {
///         for await event in try context.communicationManager.observeAdvertise(Light.self) {
///             context.logger.info("light \(event.object.name) is \(event.object.isOn ? "on" : "off")")
///         }
///     }
/// }
/// ```
///
/// Observations created in ``onCommunicationManagerStarting(_:)`` are subscribed before
/// the agent advertises its identity; publications made there are deferred until it is online.
public protocol Controller: Sendable {
    /// The controller's name: the key of its options in ``AgentConfiguration/controllers`` and
    /// the `controller` logging metadata. The type name by default.
    var name: String { get }

    /// Called once, before anything else, when the container starts.
    /// - Parameter context: the controller's context.
    /// - Throws: any error, which stops the container from starting.
    func onInit(_ context: ControllerContext) async throws

    /// Called when the communication manager is about to start: set up observations here.
    /// - Parameter context: the controller's context.
    /// - Throws: any error, which stops the container from starting.
    func onCommunicationManagerStarting(_ context: ControllerContext) async throws

    /// The controller's long-running work, run concurrently with the other controllers' once the
    /// manager is online, and cancelled on shutdown. Returning early is fine.
    /// - Parameter context: the controller's context.
    /// - Throws: any error, which shuts the container down and is rethrown by its `run()`.
    func run(_ context: ControllerContext) async throws

    /// Called when the communication manager is about to stop (still online): deadvertise and
    /// clean up here.
    /// - Parameter context: the controller's context.
    func onCommunicationManagerStopping(_ context: ControllerContext) async
}

extension Controller {
    /// The type name.
    public var name: String { String(describing: Self.self) }
    /// Does nothing.
    /// - Parameter context: unused.
    public func onInit(_ context: ControllerContext) async throws {}
    /// Does nothing.
    /// - Parameter context: unused.
    public func onCommunicationManagerStarting(_ context: ControllerContext) async throws {}
    /// Returns at once.
    /// - Parameter context: unused.
    public func run(_ context: ControllerContext) async throws {}
    /// Does nothing.
    /// - Parameter context: unused.
    public func onCommunicationManagerStopping(_ context: ControllerContext) async {}
}
