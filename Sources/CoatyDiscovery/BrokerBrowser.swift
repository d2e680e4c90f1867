import Logging

/// What a browse reports: a broker that appeared (resolved to its endpoint) or disappeared.
public enum BrokerBrowseEvent: Sendable, Hashable {
    /// A broker is advertised: where to connect.
    case found(BrokerEndpoint)
    /// The broker of this name is no longer advertised (on any interface).
    case lost(name: String)
}

/// The brokers advertised over DNS-SD, as they come and go: ``BrokerDiscovery/browse()``.
///
/// Each iteration browses on its own; it starts with the first `next()` and stops when the
/// iterator is released (the loop ends) or its task is cancelled, which ends the sequence.
/// A broker seen on several interfaces is found once and lost when it is gone from all of them.
public struct BrokerBrowser: AsyncSequence, Sendable {
    /// The events: found and lost brokers.
    public typealias Element = BrokerBrowseEvent

    let discovery: BrokerDiscovery
    /// Only this service name, or every one.
    let name: String?

    /// Starts browsing.
    /// - Returns: the iterator; browsing ends when it is released.
    public func makeAsyncIterator() -> Iterator {
        Iterator(discovery: discovery, name: name)
    }

    /// Browses while it lives.
    public struct Iterator: AsyncIteratorProtocol {
        private let discovery: BrokerDiscovery
        private let name: String?
        private let request: DNSServiceRequest
        private var operation: DNSServiceOperation?
        private var startFailure: (any Error)?
        private var replies: AsyncStream<DNSServiceReply>.Iterator
        /// The interfaces each browsed name is present on.
        private var interfaces: [String: Set<UInt32>] = [:]
        /// The names reported found and not lost since.
        private var reported: Set<String> = []

        init(discovery: BrokerDiscovery, name: String?) {
            self.discovery = discovery
            self.name = name
            request = .browse(type: discovery.serviceType)
            let (stream, continuation) = AsyncStream.makeStream(of: DNSServiceReply.self)
            replies = stream.makeAsyncIterator()
            do {
                operation = try DNSServiceOperation(request) { continuation.yield($0) }
            } catch {
                startFailure = error
            }
        }

        /// The next found or lost broker.
        /// - Returns: the event, or `nil` when the task is cancelled.
        /// - Throws: ``BrokerDiscoveryError`` when the daemon is unavailable or ends the browse.
        public mutating func next() async throws -> BrokerBrowseEvent? {
            if let startFailure {
                self.startFailure = nil
                throw startFailure
            }
            while let reply = await replies.next() {
                switch reply {
                case .browsed(let browsed, let domain, let interfaceIndex, let added):
                    if let name, browsed != name { continue }
                    if added {
                        interfaces[browsed, default: []].insert(interfaceIndex)
                        if reported.contains(browsed) { continue }
                        do {
                            let endpoint = try await discovery.resolve(
                                name: browsed,
                                domain: domain,
                                interfaceIndex: interfaceIndex
                            )
                            reported.insert(browsed)
                            return .found(endpoint)
                        } catch is CancellationError {
                            return nil
                        } catch {
                            // Another interface may report it again; a lost-and-found broker is resolved anew.
                            discovery.logger.debug(
                                "Cannot resolve a browsed broker",
                                metadata: ["name": "\(browsed)", "error": "\(error)"]
                            )
                        }
                    } else {
                        interfaces[browsed]?.remove(interfaceIndex)
                        guard interfaces[browsed]?.isEmpty ?? true else { continue }
                        interfaces[browsed] = nil
                        if reported.remove(browsed) != nil { return .lost(name: browsed) }
                    }
                case .failed(let code):
                    operation?.cancel()
                    throw BrokerDiscoveryError.failure(of: request, code: code)
                default:
                    continue
                }
            }
            return nil
        }
    }
}
