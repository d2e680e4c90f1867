// The C boundary of the module: every DNS-SD call (dns_sd.h) and every raw pointer stays in this file.
import CDNSSD
import CoatySync
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A DNS-SD request: what one ``DNSServiceOperation`` asks the daemon for.
enum DNSServiceRequest: Sendable {
    /// Register a service instance (`DNSServiceRegister`); `txt` is the encoded TXT record.
    case register(name: String, type: String, host: String?, port: UInt16, txt: [UInt8])
    /// Browse for the instances of a service type (`DNSServiceBrowse`).
    case browse(type: String)
    /// Resolve one browsed instance to its host and port (`DNSServiceResolve`).
    case resolve(name: String, type: String, domain: String, interfaceIndex: UInt32)
    /// Look up the IPv4 addresses of a host (`DNSServiceQueryRecord` for its A records).
    case queryAddress(host: String, interfaceIndex: UInt32)

    /// What the request is called in error messages.
    var operationName: String {
        switch self {
        case .register: "register"
        case .browse: "browse"
        case .resolve: "resolve"
        case .queryAddress: "address query"
        }
    }
}

/// One reply of the daemon, copied out of the C callback's memory.
enum DNSServiceReply: Sendable {
    /// The service is registered under `name` (mDNSResponder may have renamed it after a conflict).
    case registered(name: String)
    /// A browsed instance appeared (`added`) or disappeared on one interface.
    case browsed(name: String, domain: String, interfaceIndex: UInt32, added: Bool)
    /// A resolved instance: the host target of its SRV record, its port and its TXT record.
    case resolved(hostTarget: String, port: UInt16, txt: [UInt8], interfaceIndex: UInt32)
    /// An IPv4 address of the queried host (dotted quad).
    case address(String)
    /// The request failed (at its start or later): a `DNSServiceErrorType` code. The operation has ended.
    case failed(code: Int32)
}

/// Receives the replies of one operation on its thread. Immutable, so genuinely `Sendable`; its
/// unmanaged pointer is the `context` of every C callback.
private final class DNSServiceReplyHandler: Sendable {
    let deliver: @Sendable (DNSServiceReply) -> Void

    init(_ deliver: @escaping @Sendable (DNSServiceReply) -> Void) {
        self.deliver = deliver
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> DNSServiceReplyHandler? {
        guard let context else { return nil }
        return Unmanaged<DNSServiceReplyHandler>.fromOpaque(context).takeUnretainedValue()
    }
}

/// A running DNS-SD request on a thread of its own.
///
/// The thread owns the `DNSServiceRef` for its whole life: it creates it, waits on its socket with
/// `poll` and calls `DNSServiceProcessResult` (which invokes the callbacks, there), and deallocates
/// it. Nothing else touches the reference, so no lock guards it. ``cancel()`` (or `deinit`) closes
/// the write end of a wake-up pipe whose read end the thread polls too; the thread then
/// deallocates the reference (which unregisters a registration) and ends.
final class DNSServiceOperation: Sendable {
    private let wakeWriteEnd: CoatyMutex<Int32?>

    /// Starts `request`; `handler` receives every reply on the operation's thread, and a
    /// `.failed` reply when the daemon refuses the request or drops the operation.
    /// - Throws: ``BrokerDiscoveryError/systemFailure(_:)`` when no pipe or thread can be created.
    init(_ request: DNSServiceRequest, handler: @escaping @Sendable (DNSServiceReply) -> Void) throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw BrokerDiscoveryError.systemFailure("cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        _ = Self.quietCompatibilityLayer
        let wakeReadEnd = ends[0]
        wakeWriteEnd = CoatyMutex(ends[1])
        let replyHandler = DNSServiceReplyHandler(handler)
        let thread = Thread {
            Self.run(request, replyHandler: replyHandler, wakeReadEnd: wakeReadEnd)
        }
        thread.name = "CoatyDiscovery \(request.operationName)"
        thread.start()
    }

    /// Avahi's compatibility library prints a three-line warning on stderr at its first use unless
    /// `AVAHI_COMPAT_NOWARN` is set; set once (a static's lazy initialisation), never overriding the user's value.
    private static let quietCompatibilityLayer: Void = {
        #if !canImport(Darwin)
            setenv("AVAHI_COMPAT_NOWARN", "1", 0)
        #endif
    }()

    /// Ends the operation: a registration is withdrawn, a browse or resolve stops. Idempotent;
    /// a reply being delivered at this moment may still arrive.
    func cancel() {
        wakeWriteEnd.withLock { end in
            if let fd = end {
                close(fd)
                end = nil
            }
        }
    }

    deinit {
        cancel()
    }

    /// The thread's body: create the reference, process its replies until cancelled or failed, deallocate it.
    private static func run(_ request: DNSServiceRequest, replyHandler: DNSServiceReplyHandler, wakeReadEnd: Int32) {
        defer { close(wakeReadEnd) }
        // The callbacks borrow the handler through this pointer; released after the reference is deallocated.
        let context = Unmanaged.passRetained(replyHandler)
        defer { context.release() }
        var reference: DNSServiceRef?
        let started = start(request, reference: &reference, context: context.toOpaque())
        guard started == noError, let reference else {
            replyHandler.deliver(.failed(code: started == noError ? unknownError : started))
            return
        }
        defer { DNSServiceRefDeallocate(reference) }
        var descriptors = [
            pollfd(fd: DNSServiceRefSockFD(reference), events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeReadEnd, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            descriptors[0].revents = 0
            descriptors[1].revents = 0
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                replyHandler.deliver(.failed(code: unknownError))
                return
            }
            // The wake-up pipe is readable (at its end of file) once cancel() closed its write end.
            if descriptors[1].revents != 0 { return }
            if descriptors[0].revents != 0 {
                let processed = DNSServiceProcessResult(reference)
                if processed != noError {
                    replyHandler.deliver(.failed(code: processed))
                    return
                }
            }
        }
    }

    /// Creates the reference for `request` with the callback that matches it.
    private static func start(
        _ request: DNSServiceRequest,
        reference: inout DNSServiceRef?,
        context: UnsafeMutableRawPointer
    ) -> DNSServiceErrorType {
        switch request {
        case .register(let name, let type, let host, let port, let txt):
            return txt.withUnsafeBytes { record in
                DNSServiceRegister(
                    &reference,
                    0,
                    0,
                    name,
                    type,
                    nil,
                    host,
                    port.bigEndian,
                    UInt16(record.count),
                    record.baseAddress,
                    onRegisterReply,
                    context
                )
            }
        case .browse(let type):
            return DNSServiceBrowse(&reference, 0, 0, type, nil, onBrowseReply, context)
        case .resolve(let name, let type, let domain, let interfaceIndex):
            return DNSServiceResolve(&reference, 0, interfaceIndex, name, type, domain, onResolveReply, context)
        case .queryAddress(let host, let interfaceIndex):
            return DNSServiceQueryRecord(
                &reference,
                0,
                interfaceIndex,
                host,
                UInt16(kDNSServiceType_A),
                UInt16(kDNSServiceClass_IN),
                onQueryRecordReply,
                context
            )
        }
    }
}

/// `kDNSServiceErr_NoError` with the type the functions return.
private let noError = DNSServiceErrorType(kDNSServiceErr_NoError)
/// `kDNSServiceErr_Unknown` with the type the functions return.
private let unknownError = DNSServiceErrorType(kDNSServiceErr_Unknown)

/// Whether `flags` carry `kDNSServiceFlagsAdd`.
private func isAdd(_ flags: DNSServiceFlags) -> Bool {
    flags & DNSServiceFlags(kDNSServiceFlagsAdd) != 0
}

/// A C string of a callback as a Swift string (empty when absent).
private func string(_ pointer: UnsafePointer<CChar>?) -> String {
    pointer.map { String(cString: $0) } ?? ""
}

// MARK: - Callbacks (C function pointers: free functions without captures, run on the operation's thread)

/// Hands a callback's reply to the operation's handler: the failure when `errorCode` is one, else what
/// `reply` copies out of the callback's arguments (nothing when it returns `nil`).
private func deliver(
    to context: UnsafeMutableRawPointer?,
    errorCode: DNSServiceErrorType,
    _ reply: () -> DNSServiceReply?
) {
    guard let handler = DNSServiceReplyHandler.from(context) else { return }
    if errorCode != noError {
        handler.deliver(.failed(code: errorCode))
    } else if let reply = reply() {
        handler.deliver(reply)
    }
}

private func onRegisterReply(
    _ reference: DNSServiceRef?,
    _ flags: DNSServiceFlags,
    _ errorCode: DNSServiceErrorType,
    _ name: UnsafePointer<CChar>?,
    _ type: UnsafePointer<CChar>?,
    _ domain: UnsafePointer<CChar>?,
    _ context: UnsafeMutableRawPointer?
) {
    deliver(to: context, errorCode: errorCode) { .registered(name: string(name)) }
}

private func onBrowseReply(
    _ reference: DNSServiceRef?,
    _ flags: DNSServiceFlags,
    _ interfaceIndex: UInt32,
    _ errorCode: DNSServiceErrorType,
    _ name: UnsafePointer<CChar>?,
    _ type: UnsafePointer<CChar>?,
    _ domain: UnsafePointer<CChar>?,
    _ context: UnsafeMutableRawPointer?
) {
    deliver(to: context, errorCode: errorCode) {
        .browsed(name: string(name), domain: string(domain), interfaceIndex: interfaceIndex, added: isAdd(flags))
    }
}

private func onResolveReply(
    _ reference: DNSServiceRef?,
    _ flags: DNSServiceFlags,
    _ interfaceIndex: UInt32,
    _ errorCode: DNSServiceErrorType,
    _ fullName: UnsafePointer<CChar>?,
    _ hostTarget: UnsafePointer<CChar>?,
    _ port: UInt16,
    _ txtLength: UInt16,
    _ txtRecord: UnsafePointer<UInt8>?,
    _ context: UnsafeMutableRawPointer?
) {
    deliver(to: context, errorCode: errorCode) {
        .resolved(
            hostTarget: string(hostTarget),
            port: UInt16(bigEndian: port),
            txt: txtRecord.map { Array(UnsafeBufferPointer(start: $0, count: Int(txtLength))) } ?? [],
            interfaceIndex: interfaceIndex
        )
    }
}

private func onQueryRecordReply(
    _ reference: DNSServiceRef?,
    _ flags: DNSServiceFlags,
    _ interfaceIndex: UInt32,
    _ errorCode: DNSServiceErrorType,
    _ fullName: UnsafePointer<CChar>?,
    _ recordType: UInt16,
    _ recordClass: UInt16,
    _ dataLength: UInt16,
    _ data: UnsafeRawPointer?,
    _ ttl: UInt32,
    _ context: UnsafeMutableRawPointer?
) {
    deliver(to: context, errorCode: errorCode) {
        // An A record's data is the IPv4 address, 4 bytes in network order.
        guard isAdd(flags), recordType == UInt16(kDNSServiceType_A), dataLength == 4, let data else { return nil }
        return .address(UnsafeRawBufferPointer(start: data, count: 4).map(String.init).joined(separator: "."))
    }
}
