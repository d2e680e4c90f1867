import CDNSSD

/// Why publishing or finding a broker over DNS-SD failed; the description says what to do.
public enum BrokerDiscoveryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The DNS-SD daemon cannot be reached: avahi-daemon (with the D-Bus system bus) on Linux,
    /// mDNSResponder on Apple systems.
    case daemonUnavailable
    /// Another service of the type is already advertised under this name (Avahi's answer; mDNSResponder renames instead).
    case nameConflict(name: String, serviceType: String)
    /// No broker of this name was advertised within the timeout.
    case notFound(name: String, serviceType: String, seconds: Double)
    /// An argument the daemon cannot take (an empty or over-long name, a port out of range, a TXT value over 255 bytes).
    case invalidArgument(String)
    /// The daemon did not answer a request within the time allowed.
    case noAnswer(operation: String, seconds: Double)
    /// The daemon refused or ended an operation with a DNS-SD error code (`kDNSServiceErr_…`).
    case operationFailed(operation: String, code: Int32)
    /// The operating system refused a resource (a pipe, a thread).
    case systemFailure(String)

    /// A one-line message naming the cause and what to do.
    public var description: String {
        switch self {
        case .daemonUnavailable:
            #if canImport(Darwin)
                "The DNS-SD daemon (mDNSResponder) is not reachable."
            #else
                "The DNS-SD daemon is not reachable: start avahi-daemon (it needs the D-Bus system bus; "
                    + "the client finds it at $DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket)."
            #endif
        case .nameConflict(let name, let serviceType):
            "A service named '\(name)' (\(serviceType)) is already advertised; choose another name."
        case .notFound(let name, let serviceType, let seconds):
            "No broker named '\(name)' was advertised over DNS-SD (\(serviceType)) within \(format(seconds)) s."
        case .invalidArgument(let message):
            "Invalid DNS-SD argument: \(message)"
        case .noAnswer(let operation, let seconds):
            "The DNS-SD daemon did not answer the \(operation) within \(format(seconds)) s."
        case .operationFailed(let operation, let code):
            "DNS-SD \(operation) failed: \(errorName(code)) (\(code))."
        case .systemFailure(let message):
            "DNS-SD: \(message)"
        }
    }

    /// The error for a failed request: the daemon's absence has its own case.
    static func failure(of request: DNSServiceRequest, code: Int32) -> BrokerDiscoveryError {
        switch Int(code) {
        case serviceNotRunning:
            return .daemonUnavailable
        #if !canImport(Darwin)
            // Avahi's compatibility library reports a missing daemon (or D-Bus) as an unknown error.
            case kDNSServiceErr_Unknown:
                return .daemonUnavailable
        #endif
        case kDNSServiceErr_NameConflict:
            if case .register(let name, let type, _, _, _) = request {
                return .nameConflict(name: name, serviceType: type)
            }
            return .operationFailed(operation: request.operationName, code: code)
        case kDNSServiceErr_BadParam:
            return .invalidArgument("the daemon refused the arguments of the \(request.operationName)")
        default:
            return .operationFailed(operation: request.operationName, code: code)
        }
    }
}

/// `kDNSServiceErr_ServiceNotRunning` of mDNSResponder's dns_sd.h (Avahi's older header lacks it).
private let serviceNotRunning = -65_563
/// `kDNSServiceErr_Timeout` of mDNSResponder's dns_sd.h (Avahi's older header lacks it).
private let timeout = -65_568

/// The name of a `kDNSServiceErr_…` code.
private func errorName(_ code: Int32) -> String {
    switch Int(code) {
    case kDNSServiceErr_NameConflict: "name conflict"
    case kDNSServiceErr_NoMemory: "out of memory"
    case kDNSServiceErr_BadParam: "bad parameter"
    case kDNSServiceErr_Unsupported: "unsupported"
    case timeout: "timeout"
    case serviceNotRunning: "daemon not running"
    default: "error"
    }
}

/// Seconds without a trailing `.0`.
private func format(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
}
