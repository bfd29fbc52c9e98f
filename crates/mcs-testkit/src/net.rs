//! A loopback port that refuses connections and stays refused for as long
//! as the test holds it.
//!
//! Binding port 0 and dropping the listener gives a port nobody listens on
//! only until something else binds it: a server another test starts in
//! parallel may be given the same port, and the "unreachable" storage then
//! answers (CI saw `mcs-admin doctor` give up at once on such an answer).
//! A socket bound but not listening keeps the port: the kernel refuses
//! every connection to it, gives it to no other bind, and picks it as no
//! connection's source port.

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpSocket};

/// A bound, not listening, loopback TCP socket: connections to it are
/// refused until [`RefusedPort::listen`].
#[derive(Debug)]
pub struct RefusedPort {
    socket: TcpSocket,
    addr: SocketAddr,
}

impl RefusedPort {
    /// A fresh port on 127.0.0.1. Needs no runtime.
    pub fn new() -> Self {
        let socket = TcpSocket::new_v4().expect("a TCP socket");
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind 127.0.0.1:0");
        let addr = socket.local_addr().expect("the bound address");
        Self { socket, addr }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts listening on the same port ("storage starts answering"),
    /// with no moment where another bind could take it. Needs a runtime.
    pub fn listen(self) -> TcpListener {
        self.socket.listen(128).expect("listen on the held port")
    }
}

impl Default for RefusedPort {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    #[test]
    fn a_held_port_refuses_and_is_given_to_no_other_bind() {
        let port = RefusedPort::new();
        let err = std::net::TcpStream::connect(port.addr()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
        let err = std::net::TcpListener::bind(port.addr()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    }

    #[tokio::test]
    async fn listen_answers_on_the_same_port() {
        let port = RefusedPort::new();
        let addr = port.addr();
        let listener = port.listen();
        assert_eq!(listener.local_addr().unwrap(), addr);
        let (connected, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        assert_eq!(connected.unwrap().local_addr().unwrap(), accepted.unwrap().1);
    }
}
