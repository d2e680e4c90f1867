/// Durable delivery through a manager: the acknowledgements its transport holds until the
/// application has handled what it received (a durable recorder acknowledges what it committed).
///
/// Messages are numbered from 1 in the order the transport received them. While one is ``due``,
/// the transport reads nothing more; the application handles every message through that number
/// (all of them were ``delivered`` to the manager's observers by then) and calls
/// ``acknowledge(through:)``. ``onDue(_:)`` tells it when that is, without polling.
///
/// ```swift
/// let acknowledgements = manager.acknowledgements
/// acknowledgements.onDue { progress.signal() }
/// if let due = acknowledgements.due, acknowledgements.delivered >= due, handled(through: due) {
///     acknowledgements.acknowledge(through: due)
/// }
/// ```
public struct HeldAcknowledgements: Sendable {
    let transport: any CoatyTransport

    /// The number of the last received message whose acknowledgement is held, or `nil` when
    /// none is (or the transport does not hold acknowledgements).
    public var due: UInt64? { transport.acknowledgementDue }

    /// How many received messages the manager has routed to its observers completely.
    public var delivered: UInt64 { transport.deliveredCount }

    /// Acknowledges every received message through number `through`; the transport reads on.
    /// - Parameter through: the number of the last handled message.
    public func acknowledge(through: UInt64) { transport.acknowledge(through: through) }

    /// Sets the function called, on the delivery thread, after each batch of messages delivered
    /// while an acknowledgement is due. Replaces an earlier one.
    /// - Parameter handler: must return promptly and never block.
    public func onDue(_ handler: @escaping @Sendable () -> Void) { transport.onAcknowledgementDue(handler) }

    /// Reads nothing more from the network until the next connection (messages sent meanwhile
    /// stay with the broker's session); returns once a read under way ended, so ``due`` is final.
    /// A durable consumer that stops closes the intake, handles and acknowledges what it received,
    /// then stops the manager.
    public func closeIntake() async { await transport.closeIntake() }
}

extension CommunicationManager {
    /// The acknowledgements the transport holds for durable delivery (see ``HeldAcknowledgements``).
    public var acknowledgements: HeldAcknowledgements { HeldAcknowledgements(transport: transport) }
}
